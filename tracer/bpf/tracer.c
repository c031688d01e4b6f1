// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sandcheck's kernel-side tracer. BTF-typed raw tracepoints (tp_btf) only: no
 * kprobes, fentry or BPF LSM, which the kernels sandcheck runs on may lack.
 *
 * Attribution: a task belongs to a watched sandbox once it execs inside a
 * registered pid namespace (or any namespace nested in one), or is forked
 * (process or thread) by a task that already belongs; user space seeds the
 * tasks already running when it registers a namespace. The container
 * runtime's own host processes, and its init stage that enters the namespace
 * before exec'ing the workload, are never attributed. Membership is a mark
 * in the task's own storage, so the sys_exit program, which runs for every
 * syscall of every task on the host, costs an unwatched task one task-storage
 * lookup: no hashing, no probe read. A watched task's syscall costs two array
 * lookups and an increment.
 *
 * Each attributed task carries a root: the tgid of the process that first
 * exec'd inside the sandbox (one per `docker exec`), inherited by its
 * children. A tree's syscall counts go to a per-CPU array slot indexed by
 * syscall number; trees past MAX_SLOTS, and syscall numbers past
 * FAST_SYSCALLS, go to a per-CPU hash keyed by (namespace, root, syscall).
 * Only rare events (exec, fork, exit, and the syscalls worth their
 * arguments) go through the ring buffer, and a full ring buffer is counted,
 * never silent. */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "tracer.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SANDBOXES);
	__type(key, u32);   /* pid namespace inode */
	__type(value, u32); /* 1: watched */
} sandboxes SEC(".maps"); /* also holds watched trees' root pids */

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_info);
} marks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, u32);
	__type(value, struct slot_owner);
} owners SEC(".maps");

/* Free slots; user space fills it at load and refills it as watches end. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MAX_SLOTS);
	__type(value, u32);
} free_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, u32);
	__type(value, struct slot_counts);
} fast_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_COUNTS);
	__type(key, struct count_key);
	__type(value, struct count_val);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PREFIXES);
	__type(key, u32);
	__type(value, struct prefix);
} prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} events SEC(".maps");

/* Keep the event layout in the object's BTF for bpf2go's -type. */
const struct event *unused_event __attribute__((unused));

static __always_inline void stat_inc(u32 idx)
{
	u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		(*v)++;
}

static __always_inline struct event *reserve(u32 kind, const struct task_info *ti, u32 tgid, u32 pid)
{
	struct event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(STAT_LOST_EVENTS);
		return 0;
	}
	ev->ts = bpf_ktime_get_ns();
	ev->kind = kind;
	ev->ns = ti->ns;
	ev->root = ti->root;
	ev->tgid = tgid;
	ev->pid = pid;
	ev->other = 0;
	ev->nr = -1;
	ev->ret = 0;
	for (int i = 0; i < 6; i++)
		ev->args[i] = 0;
	ev->len = 0;
	ev->data[0] = 0;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	return ev;
}

/* watched_ns returns the watched namespace the task lives in, looking at its
 * own pid namespace and every ancestor below the host's, or 0. */
static __always_inline u32 watched_ns(struct task_struct *task)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	if (level == 0)
		return 0;
	for (unsigned int i = MAX_NS_DEPTH; i >= 1; i--) {
		if (i > level)
			continue;
		struct upid up = {};
		bpf_core_read(&up, sizeof(up), &pid->numbers[i]);
		u32 inum = BPF_CORE_READ(up.ns, ns.inum);
		if (bpf_map_lookup_elem(&sandboxes, &inum))
			return inum;
	}
	return 0;
}

/* new_tree gives a task that entered a watched namespace its own tree,
 * with a slot when one is free. */
static __always_inline struct task_info *new_tree(struct task_struct *task, u32 ns, u32 tgid)
{
	struct task_info fresh = {.ns = ns, .root = tgid, .slot = NO_SLOT};
	u32 slot;
	if (bpf_map_pop_elem(&free_slots, &slot) == 0 && slot < MAX_SLOTS) {
		struct slot_owner o = {.ns = ns, .root = tgid};
		if (bpf_map_update_elem(&owners, &slot, &o, BPF_ANY) == 0)
			fresh.slot = slot;
	}
	struct task_info *ti = bpf_task_storage_get(&marks, task, &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ti)
		stat_inc(STAT_LOST_TASKS);
	return ti;
}

SEC("tp_btf/sched_process_exec")
int sc_exec(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct task_info *ti = bpf_task_storage_get(&marks, task, 0, 0);
	if (!ti) {
		u32 ns = watched_ns(task);
		if (!ns)
			return 0;
		ti = new_tree(task, ns, tgid);
		if (!ti)
			return 0;
	}
	struct event *ev = reserve(EV_EXEC, ti, tgid, (u32)id);
	if (!ev)
		return 0;
	const char *fn = BPF_CORE_READ(bprm, filename);
	bpf_probe_read_kernel_str(ev->data, PATH_BYTES, fn);
	/* The new program's argv, NUL-separated: user memory of the new mm. */
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long a0 = BPF_CORE_READ(mm, arg_start), a1 = BPF_CORE_READ(mm, arg_end);
	unsigned long n = a1 - a0;
	if (n > ARGV_BYTES)
		n = ARGV_BYTES;
	if (bpf_probe_read_user(ev->data + PATH_BYTES, n & (ARGV_BYTES - 1) ?: (n ? ARGV_BYTES : 0), (void *)a0) == 0)
		ev->len = n;
	ev->other = ti->root == tgid;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int sc_fork(u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	struct task_info *ti = bpf_task_storage_get(&marks, parent, 0, 0);
	if (!ti)
		return 0;
	struct task_info copy = *ti;
	/* Threads are marked too: membership is per task. */
	if (!bpf_task_storage_get(&marks, child, &copy, BPF_LOCAL_STORAGE_GET_F_CREATE)) {
		stat_inc(STAT_LOST_TASKS);
		return 0;
	}
	u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid)
		return 0; /* a new thread: no event */
	struct event *ev = reserve(EV_FORK, &copy, BPF_CORE_READ(parent, tgid), BPF_CORE_READ(parent, pid));
	if (!ev)
		return 0;
	ev->other = ctgid;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int sc_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	bool group_dead = (bool)ctx[1];
	u64 id = bpf_get_current_pid_tgid();
	if (!group_dead)
		return 0;
	/* The storage goes with the task; nothing to clear. */
	struct task_info *ti = bpf_task_storage_get(&marks, task, 0, 0);
	if (!ti)
		return 0;
	struct event *ev = reserve(EV_EXIT, ti, id >> 32, (u32)id);
	if (!ev)
		return 0;
	ev->ret = BPF_CORE_READ(task, exit_code);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* interesting says which syscalls are worth an event with arguments (x86_64
 * numbers). */
static __always_inline int interesting(long nr)
{
	switch (nr) {
	case 2:   /* open */
	case 257: /* openat */
	case 437: /* openat2 */
	case 42:  /* connect */
	case 44:  /* sendto */
	case 46:  /* sendmsg */
	case 101: /* ptrace */
	case 105: case 106: case 113: case 114: /* setuid setgid setreuid setregid */
	case 117: case 119: case 122: case 123: /* setresuid setresgid setfsuid setfsgid */
	case 155: /* pivot_root */
	case 165: /* mount */
	case 166: /* umount2 */
	case 175: /* init_module */
	case 176: /* delete_module */
	case 246: /* kexec_load */
	case 272: /* unshare */
	case 308: /* setns */
	case 313: /* finit_module */
	case 320: /* kexec_file_load */
	case 321: /* bpf */
	case 428: /* open_tree */
	case 429: /* move_mount */
	case 430: /* fsopen */
	case 432: /* fsmount */
		return 1;
	}
	return 0;
}

/* sensitive reports whether a path starts with one of the configured
 * prefixes. */
static __always_inline int sensitive(const char *path)
{
	for (u32 p = 0; p < MAX_PREFIXES; p++) {
		u32 k = p;
		struct prefix *pre = bpf_map_lookup_elem(&prefixes, &k);
		if (!pre || pre->len == 0)
			continue;
		int ok = 1;
		for (u32 j = 0; j < PREFIX_BYTES; j++) {
			if (j >= pre->len)
				break;
			if (path[j] != pre->s[j]) {
				ok = 0;
				break;
			}
		}
		if (ok)
			return 1;
	}
	return 0;
}

static __always_inline void syscall_event(struct pt_regs *regs, long nr, long ret, const struct task_info *ti, u64 id)
{
	unsigned long a[6];
	a[0] = BPF_CORE_READ(regs, di);
	a[1] = BPF_CORE_READ(regs, si);
	a[2] = BPF_CORE_READ(regs, dx);
	a[3] = BPF_CORE_READ(regs, r10);
	a[4] = BPF_CORE_READ(regs, r8);
	a[5] = BPF_CORE_READ(regs, r9);
	const void *addr = 0;
	u32 addrlen = 0;
	if (nr == 42) { /* connect(fd, addr, len) */
		addr = (const void *)a[1];
		addrlen = a[2];
	} else if (nr == 44) { /* sendto(fd, buf, len, flags, addr, addrlen) */
		addr = (const void *)a[4];
		addrlen = a[5];
		if (!addr)
			return; /* a connected socket: connect showed where */
	} else if (nr == 46) { /* sendmsg(fd, msg, flags) */
		struct user_msghdr m = {};
		bpf_probe_read_user(&m, sizeof(m), (const void *)a[1]);
		if (!m.msg_name)
			return;
		addr = m.msg_name;
		addrlen = m.msg_namelen;
	}
	struct event *ev = reserve(EV_SYSCALL, ti, id >> 32, (u32)id);
	if (!ev)
		return;
	ev->nr = nr;
	ev->ret = ret;
	for (int i = 0; i < 6; i++)
		ev->args[i] = a[i];
	if (nr == 42 || nr == 44 || nr == 46) {
		if (addrlen > SOCKADDR_BYTES)
			addrlen = SOCKADDR_BYTES;
		if (bpf_probe_read_user(ev->data, addrlen & (SOCKADDR_BYTES - 1) ?: (addrlen ? SOCKADDR_BYTES : 0), addr) == 0)
			ev->len = addrlen;
	} else if (nr == 2 || nr == 257 || nr == 437) {
		const char *path = (const char *)(nr == 2 ? a[0] : a[1]);
		long n = bpf_probe_read_user_str(ev->data, PATH_BYTES, path);
		if (n <= 0 || !sensitive((const char *)ev->data)) {
			bpf_ringbuf_discard(ev, 0);
			return;
		}
		ev->len = n;
	}
	bpf_ringbuf_submit(ev, 0);
}

static __always_inline void tally(struct fast_count *c, long ret)
{
	if (ret >= 0 || ret < -4095)
		c->ok++;
	else if (ret == -1)
		c->eperm++;
	else if (ret == -13)
		c->eacces++;
	else if (ret == -38)
		c->enosys++;
	else
		c->other_err++;
}

/* count_slow counts in the hash: a tree without a slot, or a syscall number
 * past FAST_SYSCALLS. */
static __always_inline void count_slow(const struct task_info *ti, long nr, long ret)
{
	struct count_key key = {.ns = ti->ns, .root = ti->root, .nr = nr};
	struct count_val *v = bpf_map_lookup_elem(&counts, &key);
	if (!v) {
		struct count_val zero = {};
		bpf_map_update_elem(&counts, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&counts, &key);
		if (!v) {
			stat_inc(STAT_LOST_COUNTS);
			return;
		}
	}
	v->calls++;
	struct fast_count c = {};
	tally(&c, ret);
	v->ok += c.ok;
	v->eperm += c.eperm;
	v->eacces += c.eacces;
	v->enosys += c.enosys;
	v->other_err += c.other_err;
}

/* The hot path: every syscall of every task on the host ends here. */
SEC("tp_btf/sys_exit")
int sc_sys_exit(u64 *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_info *ti = bpf_task_storage_get(&marks, task, 0, 0);
	if (!ti)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	long nr = regs->orig_ax; /* a BTF load, no helper */
	if (nr < 0 || nr >= MAX_SYSCALL)
		return 0;
	u32 slot = ti->slot;
	if (slot < MAX_SLOTS) {
		/* A slot freed by a closed watch (and maybe taken since) is no
		 * longer this tree's: the task is no longer watched. */
		struct slot_owner *o = bpf_map_lookup_elem(&owners, &slot);
		if (!o || o->ns != ti->ns || o->root != ti->root) {
			bpf_task_storage_delete(&marks, task);
			return 0;
		}
		struct slot_counts *sc = bpf_map_lookup_elem(&fast_counts, &slot);
		if (!sc)
			return 0;
		if (nr < FAST_SYSCALLS)
			tally(&sc->c[nr], ret);
		else
			count_slow(ti, nr, ret);
	} else {
		if (!bpf_map_lookup_elem(&sandboxes, &ti->ns)) {
			bpf_task_storage_delete(&marks, task);
			return 0;
		}
		count_slow(ti, nr, ret);
	}
	if (interesting(nr))
		syscall_event(regs, nr, ret, ti, bpf_get_current_pid_tgid());
	return 0;
}
