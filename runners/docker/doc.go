// Package docker is the docker runner: each sandbox is one container started
// through the Docker Engine client (github.com/moby/moby/client) on the local
// engine, under the runc or runsc (gVisor) runtime, configured from the target
// file's docker section. The engine is the one DOCKER_HOST names, or the
// default socket, as for `sandcheck doctor`.
//
// The container's PID 1 is the probe binary's sleeper
// (`/.sandcheck/sandcheck-probe hold --max <bound>`), bind-mounted read-only
// from the harness's probe folder; probes then run through Exec.
//
// Things the package insists on, because sandcheck judges containment and
// must not weaken it itself:
//
//   - Images are never pulled. They are built or loaded locally; a missing
//     image is an error (ErrImageNotFound), and containers are created from
//     the image ID that was checked, so a moving tag cannot swap the image.
//   - The container is created exactly as the target describes it, and what
//     the engine made of the request is checked before it starts: host port
//     bindings (for ports the image exposes) and networks other than the one
//     asked for are refused.
//   - Everything read from a sandbox (exec output, logs) is bounded.
//
// testcontainers-go is for the tests only (stand-in servers, registries);
// the package does not link it.
package docker
