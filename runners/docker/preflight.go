package docker

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/targets"
)

// ErrProbeBinary is wrapped when the probe binary cannot run in a sandbox: a
// harness error, never the target's failure.
var ErrProbeBinary = errors.New("unusable probe binary")

// Preflight makes every check a run makes on a loaded target before it starts
// anything, with no side effect: the mount sources (which must exist outside
// the run's folder), the seccomp profile, the devices, the Docker settings
// as New reads them, and, on the engine, the image (present locally) and a
// named network. probeBinary, when not empty, must be a static executable.
// `sandcheck targets validate` and `sandcheck run` share it, so validate
// passes no file run refuses. Every problem found is reported, joined.
func Preflight(ctx context.Context, tg *targets.Target, probeBinary string) error {
	if tg.Runner != "" && tg.Runner != "docker" {
		// Another runner's target: nothing of Docker's to check (Load
		// checked its own section), only the probe binary a run delivers.
		if probeBinary != "" {
			return CheckProbeBinary(probeBinary)
		}
		return nil
	}
	if tg.Docker == nil {
		return fmt.Errorf("target %s: runner docker needs a docker: section", tg.Path)
	}
	var errs []error
	d := *tg.Docker
	if err := tg.CheckMounts(); err != nil {
		errs = append(errs, err)
	}
	// The runner wants resolved paths; what they resolve to is checked above.
	d.Mounts = nil
	for _, m := range tg.Docker.Mounts {
		m.Source = "/"
		d.Mounts = append(d.Mounts, m)
	}
	d.Seccomp = tg.SeccompPath()
	d.Devices = nil
	for _, dv := range tg.Docker.Devices {
		if dv.Source != targets.BlockCanarySource {
			if err := checkDevice(dv.Source); err != nil {
				errs = append(errs, fmt.Errorf("target %s: device %s: %w", tg.Path, dv.Target, err))
			}
		}
		dv.Source = "/dev/null"
		if dv.Permissions == "" {
			dv.Permissions = "r"
		}
		d.Devices = append(d.Devices, dv)
	}
	if _, err := New(d, tg.Image); err != nil {
		errs = append(errs, fmt.Errorf("target %s: %w", tg.Path, err))
	}
	if probeBinary != "" {
		if err := CheckProbeBinary(probeBinary); err != nil {
			errs = append(errs, err)
		}
	}
	if err := Ping(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if _, err := ImageDigest(ctx, tg.Image); err != nil {
		errs = append(errs, fmt.Errorf("target %s: %w", tg.Path, err))
	}
	if err := checkNetwork(ctx, d.Network); err != nil {
		errs = append(errs, fmt.Errorf("target %s: %w", tg.Path, err))
	}
	return errors.Join(errs...)
}

// checkDevice wants a host device node at p.
func checkDevice(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("host device: %w", err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		return fmt.Errorf("host path %s is not a device", p)
	}
	return nil
}

// checkNetwork wants a named network to exist (none and harness are the
// harness's own).
func checkNetwork(ctx context.Context, name string) error {
	switch name {
	case "none", "harness", "host", "default":
		return nil
	}
	c, err := engine(ctx)
	if err != nil {
		return err
	}
	if _, err := c.NetworkInspect(ctx, name, client.NetworkInspectOptions{}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker network %q does not exist (create it first, or use none or harness)", name)
		}
		return fmt.Errorf("inspecting docker network %q: %w", name, err)
	}
	return nil
}

// CheckProbeBinary wants an x86-64 ELF executable with no interpreter and no
// shared libraries: the sandbox's image has no loader the harness can count
// on, so a dynamically linked probe would fail inside and look like the
// target's doing.
func CheckProbeBinary(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%w: %s: %w (run `make build`)", ErrProbeBinary, p, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%w: %s is not an x86-64 executable (%s, %s)", ErrProbeBinary, p, f.Machine, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s is dynamically linked (it names an ELF interpreter); build it static with CGO_ENABLED=0 (`make build`)", ErrProbeBinary, p)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("%w: %s needs shared libraries %v; build it static (`make build`)", ErrProbeBinary, p, libs)
	}
	return nil
}
