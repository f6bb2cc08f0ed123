/*
 * channel.h - what a completion channel needs in a CQ's shared entry
 * (state.h's emu_cq_entry.notify), so that whichever process produces a
 * completion can raise the event in the process that owns the channel.
 *
 * The channel is a pipe its owner holds both ends of (channel.c): its read
 * end is ibv_comp_channel.fd, the fd a program polls. An event is one
 * struct emu_cq_token written to the pipe. A producer in the owner's process
 * writes it to owner_fd; a producer in another process opens
 * /proc/<owner_pid>/fd/<owner_fd>, which for a pipe opens the same pipe, and
 * checks that it is the pipe of owner_ino before writing: no file name, no
 * thread, nothing left behind when the owner dies (the /proc entry goes with
 * it, and the event with nobody to receive it is dropped).
 */
#ifndef MRDEMU_CHANNEL_H
#define MRDEMU_CHANNEL_H

#include <stdatomic.h>
#include <stdint.h>

/* emu_cq_notify.armed */
enum { EMU_ARM_NONE = 0, EMU_ARM_NEXT = 1, EMU_ARM_SOLICITED = 2 };

struct emu_cq_notify {
	_Atomic uint32_t armed;		/* taken back (CAS to NONE) by the completion that raises the event */
	_Atomic uint32_t owner_pid;	/* the channel's process; 0: the CQ has no channel */
	int32_t owner_fd;		/* the pipe's write end, in the owner's process */
	uint32_t pad;
	uint64_t owner_ino;		/* the pipe's inode: a reused fd number is not the channel */
	uint64_t user_cq;		/* the owner's struct ibv_cq *, the event's payload */
	uint64_t serial;		/* tells this CQ from a later one at the same address */
	_Atomic uint64_t raised;	/* events written to the pipe (statistics, tests) */
};

/* One event in the pipe: written and read whole (a pipe write of <= PIPE_BUF bytes is atomic). */
struct emu_cq_token {
	uint64_t user_cq;
	uint64_t serial;
};

#endif
