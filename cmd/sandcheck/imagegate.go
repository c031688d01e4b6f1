package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/provenance"
	"github.com/sandcheck/sandcheck/reports"
	"github.com/sandcheck/sandcheck/targets"
)

// baseCriterion is the release criterion the image's provenance counts for.
const baseCriterion = "immutable-approved-base"

// imageGate verifies the target's image before anything starts, when the
// target asks for it (image_verify). The policy grades a record holding
// only the provenance; if "immutable approved base" does not pass, the
// reports are written, no sandbox starts and the run exits 1. Otherwise the
// Docker engine pulls the verified image by digest and the provenance is
// returned for the run's record. A check that cannot be done exits 2.
func imageGate(ctx context.Context, w io.Writer, cfg engine.Config, tg *targets.Target) (*evidence.Provenance, error) {
	if tg.ImageVerify == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	started := time.Now().UTC()
	prov, err := provenance.Check(ctx, tg, cfg.OutDir)
	if err != nil {
		return nil, harness(err)
	}
	rec := &evidence.Record{
		Schema: evidence.Schema, RunID: "image-check-" + started.Format("20060102T150405Z"),
		StartedAt: started, FinishedAt: time.Now().UTC(), StartedBy: engine.StartedBy(),
		Tool:   evidence.Tool{Version: version},
		Target: evidence.Target{Name: tg.Name, Path: tg.Path, Digest: tg.Digest, Profile: tg.Profile},
		Runner: tg.Runner, Image: evidence.Image{Ref: tg.Image, Digest: prov.ImageID},
		Sandboxes: []evidence.Sandbox{}, Results: []evidence.Result{}, Provenance: prov,
	}
	if tg.Docker != nil {
		rec.Runtime = tg.Docker.Runtime
	}
	if err := grade(ctx, cfg, rec); err != nil {
		return nil, harness(err)
	}
	var crit *evidence.Criterion
	for i := range rec.Verdict.Criteria {
		if rec.Verdict.Criteria[i].ID == baseCriterion {
			crit = &rec.Verdict.Criteria[i]
		}
	}
	if crit == nil {
		return nil, harness(fmt.Errorf("the policy did not grade %s", baseCriterion))
	}
	// The policy decides; a policy that passes an image whose signature did
	// not verify or that is not pinned (a user module replacing image.rego)
	// leaves its verdict as it is, but the harness still starts nothing
	// from that image.
	interlock := !prov.Signature.Verified || !prov.Pinned
	if interlock || crit.Status == evidence.StatusFail || crit.Status == evidence.StatusUnconfirmed {
		paths, err := reports.WriteAll(cfg.OutDir, rec, formatsOf(cfg))
		if err != nil {
			return nil, harness(err)
		}
		fmt.Fprintf(w, "image %s failed verification (%s: %s); no sandbox started\n", tg.Image, baseCriterion, crit.Status)
		for _, r := range crit.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
		if interlock {
			fmt.Fprintf(w, "  - the harness starts no sandbox from an image that is not pinned by digest and signed (pinned %t, signature verified %t), whatever the policy says\n", prov.Pinned, prov.Signature.Verified)
		}
		for _, p := range paths {
			fmt.Fprintf(w, "  wrote %s\n", p)
		}
		return nil, &exitError{code: exitFail}
	}
	ref, err := provenance.ParseRef(tg.Image)
	if err != nil {
		return nil, harness(err)
	}
	if err := provenance.PullToEngine(ctx, ref.Context().Digest(prov.Digest)); err != nil {
		return nil, harness(err)
	}
	return prov, nil
}

func grade(ctx context.Context, cfg engine.Config, rec *evidence.Record) error {
	g := cfg.Grader // compiled by run, with its waiver flags
	if g == nil {
		var err error
		if g, err = cfg.NewGrader(); err != nil {
			return err
		}
	}
	g.Stamp(&rec.Tool)
	v, err := g.Grade(ctx, rec)
	if err != nil {
		return err
	}
	rec.Verdict = v
	return nil
}

func formatsOf(cfg engine.Config) []string {
	if len(cfg.Formats) == 0 {
		return engine.DefaultFormats
	}
	return cfg.Formats
}
