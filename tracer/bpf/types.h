/* Minimal kernel type definitions for the tracer, instead of a generated
 * vmlinux.h: only the fields the programs read, marked for CO-RE so that
 * libbpf/cilium-ebpf relocate them against the running kernel's BTF. Keeping
 * them by hand makes `make generate` reproducible on any machine, whatever
 * kernel built it. */
#ifndef SANDCHECK_TYPES_H
#define SANDCHECK_TYPES_H

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_QUEUE = 22,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

enum {
	BPF_F_NO_PREALLOC = 1,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
};

struct ns_common {
	unsigned int inum;
};

struct pid_namespace {
	unsigned int level;
	struct ns_common ns;
};

struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
};

struct mnt_namespace {
	struct ns_common ns;
};

struct nsproxy {
	struct mnt_namespace *mnt_ns;
};

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
};

struct bpf_local_storage;

struct task_struct {
	struct bpf_local_storage *bpf_storage;
	int pid;
	int tgid;
	int exit_code;
	unsigned long long start_time;
	struct pid *thread_pid;
	struct mm_struct *mm;
	struct task_struct *real_parent;
	struct nsproxy *nsproxy;
};

struct super_block {
	unsigned int s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
};

struct linux_binprm {
	struct file *file;
	const char *filename;
};

#pragma clang attribute pop

#endif
