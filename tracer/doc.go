// Package tracer watches sandboxes from the host kernel with eBPF: which
// processes they exec, fork and end, every syscall they make with its result
// (aggregated per syscall, so refusals by errno are visible), where they
// connect or send, which sensitive paths they open and which privileged calls
// (mount, ptrace, bpf, unshare/setns, the setuid family, module and kexec
// calls) they try, with arguments.
//
// It uses BTF-typed raw tracepoints only (tp_btf: sys_exit,
// sched_process_exec/fork/exit) and task storage (Linux 5.11 or later):
// kernels sandcheck runs on may lack kprobes, fentry and BPF LSM. A sandbox is
// watched by its pid namespace: a process belongs to it once it execs inside
// the namespace (or one nested in it) or is forked by one that belongs, so the
// container runtime's own host processes are never attributed to it. Every
// process that enters a sandbox on its own (each `docker exec`) starts a
// process tree, its root, which its children inherit: that is how one probe's
// doings are told apart from another's in a shared sandbox.
//
// Membership is a mark in each task's BPF task storage, so an unwatched task
// pays one lookup per syscall. Syscall counts live in per-CPU BPF maps (an
// array slot per process tree, indexed by syscall number, for the first 32
// trees; a hash past that) and cost no ring-buffer traffic;
// only rare events go through the ring buffer, and every event the kernel
// could not deliver is counted in [Lost], never silently dropped.
//
// The BPF objects are built by bpf2go from bpf/tracer.c (`make generate`) and
// committed. Nothing is pinned: closing the Tracer, or the process ending for
// any reason, unloads every program, link and map.
package tracer
