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
// doings are told apart from another's in a shared sandbox. A sandbox that
// shares the host's pid namespace (a container run with it) is watched the
// same way by its mount namespace, which every process entering it execs
// in. A sandbox whose commands are host process trees of their own (a
// wrapper's invocations, which no namespace of theirs marks beforehand) is
// watched command by command ([Tracer.WatchTrees], [Watch.AddTree]): each
// command's root, held by its runner before it runs anything, is a tree,
// and the probe binary's exec below it ([WatchOptions.RootExec]) starts
// the probe's own, apart from the wrapper's setup.
//
// Membership is a mark in each task's BPF task storage. The sys_exit
// program runs for every syscall of every task on the host: a task with no
// task storage at all (nearly every host process) is done after one load
// from its task_struct, and a sandbox's task reads neither task storage nor
// any map but a small array and the global config (addressed directly): the
// array holds, per CPU, what the storage said for the tasks that last ran
// there, by task_struct address (valid while a membership generation lasts,
// which every change of membership and every watched task's fork and exit
// bump) and the latest per-(tree, syscall) counters, matched by one packed
// tag, which move to their tree's per-CPU slot (an array indexed by syscall
// number, for the first 32 trees; a hash past that) when their place is
// needed. Everything else (membership lookups, evictions, hash counts,
// events) is a subprogram of its own, off the hot path's instructions. On
// kernels with page-table isolation and no PCID the TLB is empty at every
// syscall, so each separate allocation touched costs a page walk (40 to 80
// ns measured on such a machine): two instead of four is much of what makes
// the tracer cheap.
// Opened paths are matched against the sensitive prefixes in the same array
// before any ring-buffer room is taken. Only rare events go through the ring
// buffer: exec, fork and exit, and the first call of each kind of the
// interesting syscalls (same tree, syscall, result and key argument: the
// destination, the path, or the first argument such as ptrace's request).
// The later calls of a kind only add to its count in a bounded hash, read
// into the first event's Calls when the watch reports, and each tree streams
// at most 1024 syscall events (kinds past that are counted, by syscall, in
// [Tree].Unitemized). gVisor's sentry, which drives its stubs with tens of
// thousands of ptrace calls a run, thus costs a few events, not a flood.
// Every event the kernel could not deliver is counted in [Lost], never
// silently dropped.
//
// The BPF objects are built by bpf2go from bpf/tracer.c (`make generate`) and
// committed. Nothing is pinned: closing the Tracer, or the process ending for
// any reason, unloads every program, link and map.
package tracer
