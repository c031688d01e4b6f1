package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target amd64 -type event -type count_key -type count_val -type task_info -type slot_owner -type fast_count -type prefix -type cpu_hot -type hot_count -type hot_task -type sig_key -type sig_val -type root_file tracer bpf/tracer.c -- -I/usr/include/bpf -Ibpf -O2 -g -Wall -Werror
