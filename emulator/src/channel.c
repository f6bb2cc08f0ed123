/*
 * channel.c - completion channels: ibv_create_comp_channel,
 * ibv_destroy_comp_channel, ibv_req_notify_cq (ops.req_notify_cq),
 * ibv_get_cq_event, ibv_ack_cq_events, and the event a completion raises.
 *
 * A channel is a pipe (channel.h): ibv_comp_channel.fd is its read end, a
 * real fd a program can poll(2) or read with ibv_get_cq_event, and its owner
 * keeps the write end too, so the pipe never reads as closed. Arming a CQ
 * (ibv_req_notify_cq) sets its shared notify.armed; the process that
 * publishes a completion on an armed CQ (the DMA engine, in whichever
 * process runs it) takes the arm back with a CAS and writes one token, the
 * owner's struct ibv_cq pointer and the CQ's serial, into the pipe: directly
 * when it is the owner, through /proc/<pid>/fd/<fd> when it is not. So an
 * event needs no thread in the owner's process and no file on disk, and it
 * crosses processes as the completions do.
 *
 * No lost wake-up: the producer publishes the CQE, then (fence) reads the
 * arm; req_notify_cq stores the arm, then (fence) the caller polls. Either
 * the producer sees the arm, or the caller's poll after arming sees the CQE,
 * the usual ibv_get_cq_event / ibv_req_notify_cq / ibv_poll_cq loop.
 *
 * ibv_destroy_cq waits until every event ibv_get_cq_event returned for the
 * CQ has been acknowledged (ibv_ack_cq_events), as libibverbs does; a token
 * still in the pipe for a destroyed CQ is skipped by the next
 * ibv_get_cq_event (its serial names no CQ on the channel).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Room for 65536 events unread; the default pipe (64 KiB) holds 4096. */
#define EMU_CHANNEL_PIPE_BYTES (1 << 20)

struct emu_channel {
	struct ibv_comp_channel ch;	/* first: the program holds a pointer to it */
	int wfd;
	uint64_t ino;
	pthread_mutex_t lock;		/* the list of CQs and their delivered counts */
	struct emu_cq *cqs;
	uint64_t next_serial;
};

static struct emu_channel *emu_channel(struct ibv_comp_channel *ch)
{
	return (struct emu_channel *)ch;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct emu_channel *c;
	struct stat st;
	int fds[2];

	if (emu_context_gone(context)) {
		errno = EIO;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		int err = errno;

		free(c);
		errno = err;
		return NULL;
	}
	/* The producer (the DMA engine) never blocks on a full pipe: that event is dropped. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	fcntl(fds[1], F_SETPIPE_SZ, EMU_CHANNEL_PIPE_BYTES);
	fstat(fds[0], &st);
	c->ch.context = context;
	c->ch.fd = fds[0];
	c->ch.refcnt = 0;
	c->wfd = fds[1];
	c->ino = (uint64_t)st.st_ino;
	pthread_mutex_init(&c->lock, NULL);
	return &c->ch;
}

/* EBUSY while a CQ still uses the channel, as libibverbs. */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct emu_channel *c = emu_channel(channel);

	pthread_mutex_lock(&c->lock);
	if (channel->refcnt > 0) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&c->lock);
	close(channel->fd);
	close(c->wfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

/* ---- the CQ's side ---------------------------------------------------------------------- */

void emu_cq_bind(struct emu_cq *ecq, struct ibv_comp_channel *channel)
{
	struct emu_cq_notify *n = &emu_cq(emu_sh(ecq->cq.context), ecq->index)->notify;
	struct emu_channel *c;

	memset(&ecq->surface, 0, sizeof(ecq->surface));
	pthread_spin_init(&ecq->surface.poll_lock, PTHREAD_PROCESS_PRIVATE);
	atomic_store(&n->armed, EMU_ARM_NONE);
	atomic_store(&n->raised, 0);
	ecq->cq.channel = channel;
	if (!channel) {
		atomic_store(&n->owner_pid, 0);
		return;
	}
	c = emu_channel(channel);
	pthread_mutex_lock(&c->lock);
	ecq->surface.serial = ++c->next_serial;
	ecq->surface.next_on_channel = c->cqs;
	c->cqs = ecq;
	channel->refcnt++;
	pthread_mutex_unlock(&c->lock);
	n->owner_fd = c->wfd;
	n->owner_ino = c->ino;
	n->user_cq = (uintptr_t)&ecq->cq;
	n->serial = ecq->surface.serial;
	/* Release, last: a producer that sees the owner sees where to write. */
	atomic_store_explicit(&n->owner_pid, (uint32_t)getpid(), memory_order_release);
}

/*
 * After the shared entry is gone (no QP used it, so no producer will raise
 * an event on it): off the channel, then wait for the acknowledgements.
 */
void emu_cq_unbind(struct emu_cq *ecq)
{
	struct ibv_cq *cq = &ecq->cq;
	struct emu_channel *c = cq->channel ? emu_channel(cq->channel) : NULL;
	uint32_t delivered = 0;

	if (c) {
		pthread_mutex_lock(&c->lock);
		for (struct emu_cq **p = &c->cqs; *p; p = &(*p)->surface.next_on_channel) {
			if (*p == ecq) {
				*p = ecq->surface.next_on_channel;
				break;
			}
		}
		delivered = ecq->surface.delivered;
		cq->channel->refcnt--;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_lock(&cq->mutex);
		while (cq->comp_events_completed < delivered)
			pthread_cond_wait(&cq->cond, &cq->mutex);
		pthread_mutex_unlock(&cq->mutex);
	}
	pthread_spin_destroy(&ecq->surface.poll_lock);
}

int emu_req_notify(struct ibv_cq *cq, int solicited_only)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_shared *sh = emu_sh(cq->context);
	struct emu_cq_entry *e;
	uint32_t cur, next;

	if (emu_context_gone(cq->context))
		return EIO;
	if (ecq->index >= EMU_MAX_CQ)
		return EINVAL;
	e = emu_cq(sh, ecq->index);
	if (!atomic_load(&e->live) || e->gen != ecq->gen)
		return EINVAL;
	/* Armed for the next completion already: a request for solicited ones changes nothing. */
	cur = atomic_load(&e->notify.armed);
	do
		next = solicited_only && cur != EMU_ARM_NEXT ? EMU_ARM_SOLICITED : EMU_ARM_NEXT;
	while (!atomic_compare_exchange_weak(&e->notify.armed, &cur, next));
	/* The arm is visible before the caller's next poll reads the CQ (see above). */
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

/* ---- raising an event ------------------------------------------------------------------- */

/* Another process's pipe: open it through /proc, check it is the channel's, write without SIGPIPE. */
static int write_remote(uint32_t pid, int32_t fd, uint64_t ino, const struct emu_cq_token *t)
{
	char path[64];
	struct stat st;
	sigset_t pipe_set, old;
	ssize_t n = -1;
	int wfd;

	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
	wfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (wfd < 0)
		return 0;	/* the owner is gone: nobody to tell */
	if (fstat(wfd, &st) == 0 && S_ISFIFO(st.st_mode) && (uint64_t)st.st_ino == ino) {
		/* The owner may close the pipe after our open: EPIPE, and a SIGPIPE that must not kill this process. */
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		n = write(wfd, t, sizeof(*t));
		if (n < 0 && errno == EPIPE) {
			const struct timespec zero = { 0, 0 };

			sigtimedwait(&pipe_set, NULL, &zero);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	close(wfd);
	return n == (ssize_t)sizeof(*t);
}

void emu_cq_completed(struct emu_shared *sh, struct emu_cq_entry *cq, const struct emu_cqe *c)
{
	struct emu_cq_notify *n = &cq->notify;
	uint32_t pid = atomic_load_explicit(&n->owner_pid, memory_order_acquire);
	uint32_t armed;
	struct emu_cq_token t;
	int ok;

	(void)sh;
	if (!pid)
		return;	/* no channel: the common case costs one load */
	/* The CQE was published (release) before this: pairs with emu_req_notify's fence. */
	atomic_thread_fence(memory_order_seq_cst);
	armed = atomic_load_explicit(&n->armed, memory_order_relaxed);
	if (armed == EMU_ARM_NONE)
		return;
	/* Solicited-only: a solicited receive, or any completion in error (IB spec 11.4.2.2). */
	if (armed == EMU_ARM_SOLICITED && !c->solicited && c->wc.status == IBV_WC_SUCCESS)
		return;
	if (!atomic_compare_exchange_strong(&n->armed, &armed, EMU_ARM_NONE))
		return;	/* another completion raised it */
	t.user_cq = n->user_cq;
	t.serial = n->serial;
	if (pid == (uint32_t)getpid())
		ok = write(n->owner_fd, &t, sizeof(t)) == (ssize_t)sizeof(t);
	else
		ok = write_remote(pid, n->owner_fd, n->owner_ino, &t);
	if (ok)
		atomic_fetch_add(&n->raised, 1);
}

/* ---- the program's side ----------------------------------------------------------------- */

/* 0, or -1 with errno (EAGAIN on a channel fd the program made non-blocking). */
int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct emu_channel *c = emu_channel(channel);

	for (;;) {
		struct emu_cq_token t;
		ssize_t n = read(channel->fd, &t, sizeof(t));

		if (n != (ssize_t)sizeof(t)) {
			if (n >= 0)
				errno = EIO;
			return -1;
		}
		pthread_mutex_lock(&c->lock);
		for (struct emu_cq *e = c->cqs; e; e = e->surface.next_on_channel) {
			if ((uintptr_t)&e->cq == t.user_cq && e->surface.serial == t.serial) {
				e->surface.delivered++;
				*cq = &e->cq;
				*cq_context = e->cq.cq_context;
				pthread_mutex_unlock(&c->lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&c->lock);
		/* A token for a CQ destroyed since: skip it. */
	}
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
