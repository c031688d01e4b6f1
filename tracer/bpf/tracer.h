/* Shared between the BPF programs and bpf2go's generated Go types. */
#ifndef SANDCHECK_TRACER_H
#define SANDCHECK_TRACER_H

#define MAX_SANDBOXES 256
#define MAX_COUNTS 32768
#define MAX_SLOTS 32       /* trees counted in the per-CPU array */
#define NO_SLOT 0xffffffff /* a tree past MAX_SLOTS: counted in the hash */
#define FAST_SYSCALLS 512  /* syscalls counted in the per-CPU array */
#define ARG_WORDS 7        /* words of the event-worthy bitmap: syscalls below 448 */
#define MAX_PREFIXES 16
#define PREFIX_BYTES 64
#define MAX_NS_DEPTH 8
#define MAX_SYSCALL 1024
#define RINGBUF_BYTES (4 << 20)
#define PATH_BYTES 256
#define ARGV_BYTES 256
#define SOCKADDR_BYTES 128
#define HOT_COUNTS 32     /* per CPU: recent (tree, syscall) counters */
#define HOT_UNWATCHED 0xfffffffe /* a cached "not watched" */
#define MAX_SIGS 16384    /* distinct event-worthy calls counted in the kernel */
#define TREE_EVENTS 1024  /* syscall events one tree may stream */
#define BUDGET_NR 0xffffffff /* a sig_key.nr: the tree's streamed events */
#define HELD_ROOT 0x80000000 /* in a root: a held command's tree (no tgid has it) */

enum event_kind {
	EV_EXEC = 1,
	EV_FORK = 2,
	EV_EXIT = 3,
	EV_SYSCALL = 4,
};

enum stat_idx {
	STAT_LOST_EVENTS = 0, /* ring buffer full */
	STAT_LOST_TASKS = 1,  /* no task storage: a process went unattributed */
	STAT_LOST_COUNTS = 2, /* count map full: a syscall went uncounted */
	STAT_REFILL = 3,
	STAT_MAX = 4,
};

/* What a watched task carries in its task storage; a tree's slot says
 * where its counts go. */
struct task_info {
	u32 ns;   /* the watched pid namespace's inode (or a watched tree's root pid) */
	u32 root; /* tgid of the process that first exec'd in the sandbox */
	u32 slot; /* the tree's slot in fast_counts, or NO_SLOT */
	u32 epoch; /* the slot's epoch when the tree took it */
};

/* The owner of a slot: a tree, or ns 0 when the slot is free. Each taking
 * of a slot starts a new epoch, so counters left from an earlier owner are
 * told apart. A draining slot's watch is closing: user space is reading its
 * counters, which stay where they are until it frees the slot. */
struct slot_owner {
	u32 ns;
	u32 root;
	u32 epoch;
	u32 draining;
};

/* One syscall's results in a slot; calls are their sum. */
struct fast_count {
	u64 ok;
	u64 eperm;
	u64 eacces;
	u64 enosys;
	u64 other_err;
};

struct slot_counts {
	struct fast_count c[FAST_SYSCALLS];
};

/* A sensitive path prefix; head and mask are its first (up to) 8 bytes as
 * one word, so a path is told apart from most prefixes in one compare. An
 * unused prefix has mask 0 and head 1: it never matches. */
struct prefix {
	u64 head;
	u64 mask;
	u32 len;
	char s[PREFIX_BYTES];
};

/* What the storage of the task that last made a syscall on a CPU said,
 * and the membership generation it was read in. */
struct hot_task {
	u64 task; /* the task_struct's address: a freed one is reused only after
		   * its task's exit bumped the generation */
	u64 base; /* hot_tag(slot, epoch, 0) for a tree with a slot, else 0 */
	u64 gen;  /* the generation's two shares, as read_gen reads them */
	u32 slot; /* HOT_UNWATCHED, NO_SLOT or the tree's slot */
	u32 ns;
	u32 root;
	u32 pad;
};

/* A tree's successful calls of one syscall, held per CPU until another
 * (tree, syscall) needs the place; then they move to the tree's slot. Four
 * to a cache line, so a tree's few busiest syscalls share one or two;
 * failed calls go to the slot at once. */
struct hot_count {
	u64 tag; /* hot_tag(slot, epoch, nr); 0: unused (epochs start at 1) */
	u32 ok;  /* moved to the slot before it could overflow */
	u32 ev;  /* 1: the syscall is worth an event (arg_bits) */
};

/* One CPU's hot state: the only map memory the sys_exit program touches for
 * a cached task's syscall, besides the line of hot global data. The task's
 * entry shares its cache line with the first counters. */
struct cpu_hot {
	struct hot_task cur;
	struct hot_count counts[HOT_COUNTS];
	char path[PATH_BYTES]; /* an opened path, before it is known sensitive */
};

/* The sensitive path prefixes, global data the program addresses directly
 * (no map lookup); read only for opens. */
struct config {
	struct prefix prefixes[MAX_PREFIXES];
};

/* A file whose exec by a task of watch ns starts a tree of its own there
 * (the probe binary under a wrapper). dev is the kernel's dev_t. */
struct root_file {
	u32 ns;
	u32 dev;
	u64 ino;
};

struct count_key {
	u32 ns;
	u32 root;
	u32 nr;
	u32 pad;
};

/* What makes event-worthy calls of one tree alike: the syscall, its result
 * (an errno, or 0 for any success) and a key argument (disc: a sockaddr's or
 * a path's hash, or the first argument). Only the first call of a kind is
 * streamed; the rest are counted in the kernel. */
struct sig_key {
	u32 ns;
	u32 root;
	u32 nr;
	s32 err;
	u64 disc;
};

struct sig_val {
	u64 calls;    /* calls of this kind (or, for BUDGET_NR, events streamed) */
	u32 streamed; /* 1: the first call went to the ring buffer */
	u32 pad;
};

struct count_val {
	u64 calls;
	u64 ok;
	u64 eperm;
	u64 eacces;
	u64 enosys;
	u64 other_err;
};


/* The user-space ABI's msghdr head. */
struct user_msghdr {
	void *msg_name;
	int msg_namelen;
};

struct event {
	u64 ts;
	u32 kind;
	u32 ns;
	u32 root;
	u32 tgid;
	u32 pid;
	u32 other; /* fork: child tgid; exec: 1 when the process is a new root;
		    * syscall: 1 when its later alikes are counted in sigs */
	s64 nr;
	s64 ret; /* syscall: return value; exit: exit code */
	u64 args[6];
	u64 disc; /* syscall: the key argument its sig_key holds */
	u32 len; /* bytes of data used (exec: argv bytes after the path) */
	char comm[16];
	u8 data[PATH_BYTES + ARGV_BYTES];
};

#endif
