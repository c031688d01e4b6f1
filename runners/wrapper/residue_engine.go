package wrapper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/probes"
)

// engineResidue is what a box that reached the host's container engine
// (a wrapper that leaves /var/run/docker.sock in place, as firejail's
// strict settings do for root) made through it and left: the containers,
// networks and volumes labelled with the probe's token. Each is removed:
// the host is left as it was, and the run leaves nothing behind.
type engineResidue struct {
	containers, networks, volumes []string
	// failed says why the engine could not be asked ("" when it was).
	failed string
}

// engineTimeout bounds the engine calls of one residue check.
const engineTimeout = 20 * time.Second

// findEngineResidue asks the engine the runner reaches (its own client,
// made from the environment) for objects labelled with token, and removes
// them.
func (sb *Sandbox) findEngineResidue(ctx context.Context, token string) engineResidue {
	var out engineResidue
	nc, err := sb.r.NetworkAPI(ctx)
	if err != nil {
		out.failed = err.Error()
		return out
	}
	c, ok := nc.(client.APIClient)
	if !ok {
		out.failed = "the runner's engine client cannot list containers"
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	f := make(client.Filters).Add("label", probes.LabelTeardownToken+"="+token)
	var errs []error
	ctrs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		out.failed = fmt.Sprintf("listing the engine's containers: %v", err)
		return out
	}
	for _, ctr := range ctrs.Items {
		out.containers = append(out.containers, "container "+shortID(ctr.ID)+" labelled with the token still exists")
		if _, err := c.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", shortID(ctr.ID), err))
		}
	}
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing the engine's networks: %w", err))
	}
	for _, n := range nets.Items {
		out.networks = append(out.networks, "engine network "+n.Name+" labelled with the token still exists")
		if _, err := c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("removing network %s: %w", n.Name, err))
		}
	}
	vols, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing the engine's volumes: %w", err))
	}
	for _, v := range vols.Items {
		out.volumes = append(out.volumes, "engine volume "+v.Name+" labelled with the token still exists")
		if _, err := c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("removing volume %s: %w", v.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		out.failed = err.Error()
	}
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
