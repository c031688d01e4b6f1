// Package docker is the docker runner: each sandbox is one container started
// through testcontainers-go on the local Docker engine, under the runc or
// runsc (gVisor) runtime, configured from the target file's docker section.
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
//   - testcontainers-go's reaper stays off. Before it first talks to the
//     engine, the package sets TESTCONTAINERS_RYUK_DISABLED=true when the
//     variable is unset, and it refuses to work if the reaper is enabled
//     anyway: the reaper is pulled from a registry and runs with the engine
//     socket.
//   - What testcontainers-go might add on its own (host port bindings for
//     ports the image exposes, extra networks) is checked after the container
//     is created and refused.
//   - Everything read from a sandbox (exec output, logs) is bounded.
//
// testcontainers-go logs through a process-wide logger; the package routes
// it to slog.Default at debug level the first time it talks to the engine.
package docker
