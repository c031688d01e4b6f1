// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sandcheck's kernel-side tracer. BTF-typed raw tracepoints (tp_btf) only: no
 * kprobes, fentry or BPF LSM, which the kernels sandcheck runs on may lack.
 *
 * Attribution: a task belongs to a watched sandbox once it execs inside a
 * registered pid namespace (or any namespace nested in one) or a registered
 * mount namespace, or is forked
 * (process or thread) by a task that already belongs; user space seeds the
 * tasks already running when it registers a namespace. The container
 * runtime's own host processes, and its init stage that enters the namespace
 * before exec'ing the workload, are never attributed. Membership is a mark
 * in the task's own storage.
 *
 * The sys_exit program runs for every syscall of every task on the host, so
 * its common case avoids even the task-storage lookup: a small per-CPU cache
 * remembers, for the tasks that last ran there, what their storage said
 * (watched, and into which slot; or not watched). An entry holds only while
 * the membership generation it was filled in lasts; every change of
 * membership (a new tree at exec, user space seeding or closing a watch)
 * bumps the generation. Before any of that, a task with no BPF task storage
 * at all, which is nearly every task of the host, is done after one load
 * from its task_struct.
 *
 * Each attributed task carries a root: the tgid of the process that first
 * exec'd inside the sandbox (one per `docker exec`), inherited by its
 * children. A tree's syscall counts go to a per-CPU array slot indexed by
 * syscall number; trees past MAX_SLOTS, and syscall numbers past
 * FAST_SYSCALLS, go to a per-CPU hash keyed by (namespace, root, syscall).
 * Only rare events (exec, fork, exit, and the first call of each kind of
 * the syscalls worth their arguments) go through the ring buffer; the later
 * calls of a kind are counted in a hash, and each tree streams a bounded
 * number of syscall events. A full ring buffer is counted, never silent. */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "tracer.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SANDBOXES);
	__type(key, u32);   /* pid or mount namespace inode */
	__type(value, u32); /* 1: watched */
} sandboxes SEC(".maps"); /* also holds watched trees' keys (tracer/watch.go) */

/* Files whose exec by a watched task starts a tree of its own in the
 * task's watch (WatchOptions.RootExec). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SANDBOXES);
	__type(key, struct root_file);
	__type(value, u32);
} root_files SEC(".maps");

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

/* Event-worthy calls by kind, and each tree's streamed events: what is not
 * itemized in the ring buffer is counted here, read and cleared by user
 * space when the watch closes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SIGS);
	__type(key, struct sig_key);
	__type(value, struct sig_val);
} sigs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} events SEC(".maps");

/* Per-CPU hot state, in one small element per CPU: a cached task's
 * syscall touches this and the line of hot global data only. The kernel
 * inlines the lookup of a per-CPU array's element. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cpu_hot);
} hot SEC(".maps");

/* The sensitive path prefixes; user space sets them before attaching. */
struct config cfg;

/* The one cache line of global data every watched syscall reads, in a
 * section (and so a map) of its own: the syscalls worth an event with their
 * arguments (a bit per number below 448, tracer.go: argSyscalls), and the
 * membership generation, which is the sum of the kernel side's gen and user
 * space's ugen, each bumped only by its side: a change on either side makes
 * it grow, with no read-modify-write across the two. */
u32 gen SEC(".data.hot") __attribute__((aligned(8)));
volatile u32 ugen SEC(".data.hot");
u64 arg_bits[ARG_WORDS] SEC(".data.hot");

/* read_gen reads the generation's two shares in one load: gen and ugen
 * are the section's first two words (tracer_test.go holds the layout). A
 * change of either share changes the whole. */
static __always_inline u64 read_gen(void)
{
	return *(volatile u64 *)&gen;
}

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

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
	ev->disc = 0;
	for (int i = 0; i < 6; i++)
		ev->args[i] = 0;
	ev->len = 0;
	ev->data[0] = 0;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	return ev;
}

/* watched_ns returns the watched namespace the task lives in, looking at its
 * own pid namespace and every ancestor below the host's, then at its mount
 * namespace (a container that shares the host's pid namespace still has a
 * mount namespace of its own, which each process entering it execs in), or
 * 0. */
static __always_inline u32 watched_ns(struct task_struct *task)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	for (unsigned int i = MAX_NS_DEPTH; i >= 1; i--) {
		if (i > level)
			continue;
		struct upid up = {};
		bpf_core_read(&up, sizeof(up), &pid->numbers[i]);
		u32 inum = BPF_CORE_READ(up.ns, ns.inum);
		if (bpf_map_lookup_elem(&sandboxes, &inum))
			return inum;
	}
	u32 mnt = BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum);
	if (mnt && bpf_map_lookup_elem(&sandboxes, &mnt))
		return mnt;
	return 0;
}

static __always_inline void bump_generation(void)
{
	__sync_fetch_and_add(&gen, 1);
}

/* new_tree gives a task that entered a watched namespace its own tree,
 * with a slot when one is free. */
static __always_inline struct task_info *new_tree(struct task_struct *task, u32 ns, u32 tgid)
{
	struct task_info fresh = {.ns = ns, .root = tgid, .slot = NO_SLOT};
	u32 slot;
	if (bpf_map_pop_elem(&free_slots, &slot) == 0 && slot < MAX_SLOTS) {
		struct slot_owner *old = bpf_map_lookup_elem(&owners, &slot);
		if (old) {
			struct slot_owner o = {.ns = ns, .root = tgid, .epoch = old->epoch + 1};
			if (bpf_map_update_elem(&owners, &slot, &o, BPF_ANY) == 0) {
				fresh.slot = slot;
				fresh.epoch = o.epoch;
			}
		}
	}
	struct task_info *ti = bpf_task_storage_get(&marks, task, &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ti)
		stat_inc(STAT_LOST_TASKS);
	/* The task may be cached as unwatched on any CPU. */
	bump_generation();
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
	} else if (ti->root & HELD_ROOT) {
		/* A task of a held command's tree (a wrapper's processes)
		 * exec'ing a root file (the probe binary) starts a tree of its
		 * own: its doings apart from those of the wrapper that started
		 * it. Below that, the probe's own re-execs stay its own. */
		struct inode *ino = BPF_CORE_READ(bprm, file, f_inode);
		struct root_file rf = {.ns = ti->ns, .dev = BPF_CORE_READ(ino, i_sb, s_dev), .ino = BPF_CORE_READ(ino, i_ino)};
		if (bpf_map_lookup_elem(&root_files, &rf)) {
			u32 ns = ti->ns;
			bpf_task_storage_delete(&marks, task);
			ti = new_tree(task, ns, tgid);
			if (!ti)
				return 0;
		}
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
	/* The child's task_struct may be a freed one some CPU cached as
	 * unwatched. */
	bump_generation();
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
	/* The storage goes with the task; nothing to clear. */
	struct task_info *ti = bpf_task_storage_get(&marks, task, 0, 0);
	if (!ti)
		return 0;
	/* Every CPU's cache may hold the task by its task_struct's address,
	 * which a new task may get once this one is freed. */
	bump_generation();
	if (!group_dead)
		return 0;
	struct event *ev = reserve(EV_EXIT, ti, id >> 32, (u32)id);
	if (!ev)
		return 0;
	ev->ret = BPF_CORE_READ(task, exit_code);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* head_sensitive reports whether a path whose first 8 bytes are w may start
 * with one of the configured prefixes, which are all absolute: a relative
 * path is done after one compare, an absolute one after a word compare per
 * prefix. Bytes past a short path's NUL cannot turn a miss into a match (a
 * prefix's head holds no NUL), nor a match into a miss that sensitive would
 * not also find. */
static __always_inline int head_sensitive(const struct config *g, u64 w)
{
	if ((w & 0xff) != '/')
		return 0;
	for (u32 p = 0; p < MAX_PREFIXES; p++) {
		const struct prefix *pre = &g->prefixes[p];
		if ((w & pre->mask) == pre->head)
			return 1;
	}
	return 0;
}

#define AT_FDCWD -100

/* is_open says whether a call is open, openat or openat2. */
static __always_inline int is_open(long nr)
{
	return nr == 2 || nr == 257 || nr == 437;
}

/* open_path is the path argument of open, and of openat and openat2 from
 * the working directory (AT_FDCWD), and 0 for any other call. */
static __always_inline const char *open_path(long nr, const struct pt_regs *regs)
{
	switch (nr) {
	case 2: /* open(path, flags, mode) */
		return (const char *)regs->di;
	case 257: /* openat(dirfd, path, flags, mode) */
	case 437: /* openat2(dirfd, path, how, size) */
		/* A name given relative to a directory descriptor is not read:
		 * reading user memory is most of what an open costs the tracer,
		 * and a walk through a tree (a search, a build) opens each file
		 * that way. */
		if ((int)regs->di != AT_FDCWD)
			return 0;
		return (const char *)regs->si;
	}
	return 0;
}

/* sensitive reports whether a path (in a PATH_BYTES buffer) starts with one
 * of the configured prefixes: a word compare per prefix, then the bytes
 * past the first 8 of those whose head it shares. */
static __always_inline int sensitive(const struct config *g, const char *path)
{
	if (path[0] != '/')
		return 0;
	u64 w = *(const u64 *)path;
	for (u32 p = 0; p < MAX_PREFIXES; p++) {
		const struct prefix *pre = &g->prefixes[p];
		if ((w & pre->mask) != pre->head)
			continue;
		int ok = 1;
		for (u32 j = 8; j < PREFIX_BYTES; j++) {
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

/* hash_bytes hashes the first len bytes of b (at most PATH_BYTES), a word at
 * a time: what tells one path or address from another in a sig_key. */
static __always_inline u64 hash_bytes(const char *b, u32 len)
{
	u64 h = 0xcbf29ce484222325ULL ^ len;
	for (u32 i = 0; i < PATH_BYTES / 8; i++) {
		if (i * 8 >= len)
			break;
		u64 w = *(const u64 *)(b + i * 8);
		u32 left = len - i * 8;
		if (left < 8)
			w &= (1ULL << (left * 8)) - 1;
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

/* take_budget says whether a tree may stream one more syscall event, and
 * counts it when so. Past TREE_EVENTS its new kinds of calls are still
 * counted in sigs, just not itemized. */
static __always_inline u32 take_budget(const struct task_info *ti)
{
	struct sig_key bk = {.ns = ti->ns, .root = ti->root, .nr = BUDGET_NR};
	struct sig_val *b = bpf_map_lookup_elem(&sigs, &bk);
	if (!b) {
		struct sig_val one = {.calls = 1};
		if (bpf_map_update_elem(&sigs, &bk, &one, BPF_NOEXIST) == 0)
			return 1;
		b = bpf_map_lookup_elem(&sigs, &bk);
		if (!b)
			return 1; /* sigs is full: stream, as without it */
	}
	if (b->calls >= TREE_EVENTS)
		return 0;
	__sync_fetch_and_add(&b->calls, 1);
	return 1;
}

/* syscall_event handles an event-worthy call: the first of its kind in its
 * tree (same syscall, result and key argument) goes to the ring buffer with
 * its arguments, the later ones only add to its count in sigs. A process
 * that repeats itself (gVisor's sentry drives its stubs with tens of
 * thousands of ptrace calls per run) thus costs a hash update per call, not
 * an event. */
static __always_inline void syscall_event(struct pt_regs *regs, long nr, long ret, const struct task_info *ti,
					  const struct config *g, struct cpu_hot *h)
{
	const char *path = open_path(nr, regs);
	if (path) {
		/* Nearly every open is told apart by the path's first word, read
		 * alone, before anything else; the whole string is copied only
		 * when that word matches a prefix (or cannot be read: a short
		 * path at the end of a page). */
		u64 w;
		if (bpf_probe_read_user(&w, sizeof(w), path) == 0 && !head_sensitive(g, w))
			return;
	} else if (is_open(nr)) {
		return; /* from a directory descriptor: not read, no event */
	}
	/* BTF loads from the trusted pt_regs, no helper calls. */
	unsigned long a[6];
	a[0] = regs->di;
	a[1] = regs->si;
	a[2] = regs->dx;
	a[3] = regs->r10;
	a[4] = regs->r8;
	a[5] = regs->r9;
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
	u64 disc = a[0];
	long pathlen = 0;
	if (path) {
		/* Most opens are not sensitive: decide before taking ring-buffer
		 * room, in the CPU's own scratch. */
		pathlen = bpf_probe_read_user_str(h->path, PATH_BYTES, path);
		if (pathlen <= 0 || !sensitive(g, h->path))
			return;
		disc = hash_bytes(h->path, pathlen);
	} else if (nr == 42 || nr == 44 || nr == 46) {
		if (addrlen > SOCKADDR_BYTES)
			addrlen = SOCKADDR_BYTES;
		if (bpf_probe_read_user(h->path, addrlen & (SOCKADDR_BYTES - 1) ?: (addrlen ? SOCKADDR_BYTES : 0), addr) != 0)
			addrlen = 0;
		disc = hash_bytes(h->path, addrlen);
	}
	struct sig_key key = {.ns = ti->ns, .root = ti->root, .nr = nr, .err = (ret < 0 && ret >= -4095) ? ret : 0, .disc = disc};
	struct sig_val *v = bpf_map_lookup_elem(&sigs, &key);
	if (v) {
		__sync_fetch_and_add(&v->calls, 1);
		return;
	}
	struct sig_val first = {.calls = 1, .streamed = take_budget(ti)};
	u32 aggregated = 1;
	if (bpf_map_update_elem(&sigs, &key, &first, BPF_NOEXIST) != 0) {
		v = bpf_map_lookup_elem(&sigs, &key);
		if (v) { /* another CPU's call of the same kind came first */
			__sync_fetch_and_add(&v->calls, 1);
			return;
		}
		/* sigs is full: stream each call, as without it. */
		aggregated = 0;
		first.streamed = 1;
	}
	if (!first.streamed)
		return;
	/* Only a call that is streamed needs its ids. */
	u64 id = bpf_get_current_pid_tgid();
	struct event *ev = reserve(EV_SYSCALL, ti, id >> 32, (u32)id);
	if (!ev)
		return;
	ev->nr = nr;
	ev->ret = ret;
	ev->other = aggregated;
	ev->disc = disc;
	for (int i = 0; i < 6; i++)
		ev->args[i] = a[i];
	if (nr == 42 || nr == 44 || nr == 46) {
		__builtin_memcpy(ev->data, h->path, SOCKADDR_BYTES);
		ev->len = addrlen;
	} else if (pathlen > 0) {
		__builtin_memcpy(ev->data, h->path, PATH_BYTES);
		ev->len = pathlen;
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

static __always_inline u64 hot_tag(u32 slot, u32 epoch, u32 nr)
{
	return (u64)epoch << 32 | slot << 16 | nr;
}

/* lookup_membership fills a cache entry from the task's storage, checking
 * that its tree is still watched (dropping the mark when not). Off the hot
 * path: a subprogram of its own. */
static __noinline void lookup_membership(struct hot_task *e, struct task_struct *task, u64 g)
{
	e->task = (u64)task;
	e->gen = g;
	e->slot = HOT_UNWATCHED;
	e->base = 0;
	struct task_info *ti = bpf_task_storage_get(&marks, task, 0, 0);
	if (!ti)
		return;
	u32 slot = ti->slot;
	if (slot < MAX_SLOTS) {
		/* A slot freed by a closed watch (and maybe taken since) is no
		 * longer this tree's: the task is no longer watched. */
		struct slot_owner *o = bpf_map_lookup_elem(&owners, &slot);
		if (!o || o->ns != ti->ns || o->root != ti->root || o->epoch != ti->epoch || o->draining) {
			bpf_task_storage_delete(&marks, task);
			return;
		}
		e->base = hot_tag(slot, ti->epoch, 0);
	} else if (!bpf_map_lookup_elem(&sandboxes, &ti->ns)) {
		bpf_task_storage_delete(&marks, task);
		return;
	} else {
		slot = NO_SLOT;
	}
	e->slot = slot;
	e->ns = ti->ns;
	e->root = ti->root;
}

/* evict makes room in a hot counter: a live tree's count moves to its
 * slot; a collected tree's is dropped. A draining tree's stays for user
 * space to read, and evict says so by returning 0. */
static __always_inline int evict(struct hot_count *c)
{
	if (!c->tag)
		return 1;
	u32 vslot = (c->tag >> 16) & 0xffff, vnr = c->tag & 0xffff, vepoch = c->tag >> 32;
	struct slot_owner *o = bpf_map_lookup_elem(&owners, &vslot);
	if (!o || o->epoch != vepoch || o->ns == 0)
		return 1;
	if (o->draining)
		return 0;
	struct slot_counts *sc = bpf_map_lookup_elem(&fast_counts, &vslot);
	if (!sc || vnr >= FAST_SYSCALLS)
		return 1;
	sc->c[vnr].ok += c->ok;
	return 1;
}

/* arg_call says whether a syscall is worth an event with its arguments. */
static __always_inline u32 arg_call(u64 nr)
{
	u64 w = nr >> 6;
	barrier_var(w); /* the bound checked is the bound used */
	if (w >= ARG_WORDS)
		return 0;
	return (arg_bits[w] >> (nr & 63)) & 1;
}

/* count_slot counts a call in its tree's slot directly, and returns whether
 * the syscall is worth an event. */
static __always_inline u32 count_slot(u32 slot, u32 epoch, u32 nr, long ret)
{
	/* The slot may have changed hands since the task's cache entry was
	 * read (this program can be preempted): count only in the tree's own
	 * epoch, as the hot counters' tags do. */
	struct slot_owner *o = bpf_map_lookup_elem(&owners, &slot);
	struct slot_counts *sc = bpf_map_lookup_elem(&fast_counts, &slot);
	if (o && o->epoch == epoch && sc && nr < FAST_SYSCALLS)
		tally(&sc->c[nr], ret);
	return arg_call(nr);
}

/* count_failed counts a failed call: in the slot, never in the hot
 * counters, which hold successes only. Off the hot path. */
static __noinline u32 count_failed(u32 slot, u32 epoch, u32 nr, long ret)
{
	return count_slot(slot, epoch, nr, ret);
}

/* count_miss counts a successful call whose hot counter holds another
 * (tree, syscall): it evicts that one first, or, when it cannot (a draining
 * tree's), counts in the slot directly. It returns whether the syscall is
 * worth an event. Off the hot path. */
static __noinline u32 count_miss(struct hot_count *c, u32 slot, u64 tag, u32 nr)
{
	if (!evict(c))
		return count_slot(slot, tag >> 32, nr, 0);
	c->tag = tag;
	c->ok = 1;
	c->ev = arg_call(nr);
	return c->ev;
}

/* flush_ok moves a hot counter's count to its slot before it can
 * overflow. Off the hot path. */
static __noinline void flush_ok(struct hot_count *c)
{
	if (evict(c))
		c->ok = 0;
}

/* task_of is the cache entry's tree as its task storage holds it. */
static __always_inline struct task_info task_of(const struct hot_task *e)
{
	return (struct task_info){.ns = e->ns, .root = e->root, .slot = e->slot, .epoch = e->base >> 32};
}

/* event_call hands an event-worthy call to syscall_event. Off the hot
 * path. */
static __noinline void event_call(struct pt_regs *regs, long nr, long ret, const struct hot_task *e, struct cpu_hot *h)
{
	struct task_info ti = task_of(e);
	syscall_event(regs, nr, ret, &ti, &cfg, h);
}

/* other_call counts what the hot counters do not: a call of a tree
 * without a slot, or a syscall number past FAST_SYSCALLS (in the hash),
 * and hands on the first kind's event-worthy calls. Off the hot path. */
static __noinline void other_call(struct pt_regs *regs, u64 nr, long ret, const struct hot_task *e, struct cpu_hot *h)
{
	if (nr >= MAX_SYSCALL)
		return;
	struct task_info ti = task_of(e);
	count_slow(&ti, nr, ret);
	if (arg_call(nr))
		syscall_event(regs, nr, ret, &ti, &cfg, h);
}

/* The hot path: every syscall of every task on the host ends here. */
SEC("tp_btf/sys_exit")
int sc_sys_exit(u64 *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	/* A task with no BPF task storage at all (nearly every task of the
	 * host) has no mark: done, without touching any map. */
	if (bpf_core_field_exists(task->bpf_storage) && likely(!task->bpf_storage))
		return 0;
	u32 zero = 0;
	struct cpu_hot *h = bpf_map_lookup_elem(&hot, &zero);
	if (!h)
		return 0;
	u64 g = read_gen();
	struct hot_task *e = &h->cur;
	if (unlikely(e->task != (u64)task || e->gen != g))
		lookup_membership(e, task, g);
	u64 base = e->base;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	u64 nr = regs->orig_ax; /* a BTF load, no helper; -1 is past every bound */
	if (unlikely(!base || nr >= FAST_SYSCALLS)) {
		/* Not watched, a tree without a slot, or a syscall past the
		 * hot counters. */
		if (e->slot != HOT_UNWATCHED)
			other_call(regs, nr, ret, e, h);
		return 0;
	}
	u32 slot = e->slot;
	u32 ev;
	if (unlikely((unsigned long)ret >= (unsigned long)-4095)) {
		ev = count_failed(slot, base >> 32, nr, ret);
	} else {
		u64 tag = base | nr;
		struct hot_count *c = &h->counts[(slot * 3 + nr) & (HOT_COUNTS - 1)];
		if (likely(c->tag == tag)) {
			if (unlikely(++c->ok >= 1U << 31))
				flush_ok(c);
			ev = c->ev;
		} else {
			ev = count_miss(c, slot, tag, nr);
		}
	}
	if (unlikely(ev))
		event_call(regs, nr, ret, e, h);
	return 0;
}
