/*
 * fork.c - fork support: ibv_fork_init, ibv_is_fork_initialized,
 * ibv_dontfork_range, ibv_dofork_range.
 *
 * libibverbs needs them because a NIC DMAs into the physical pages an MR
 * pinned at registration, which a fork's copy-on-write would swap under it
 * (madvise(MADV_DONTFORK) on every MR keeps the parent's pages). The
 * emulator pins nothing: the DMA engine copies through virtual addresses,
 * and a page copied on write is simply the page it then copies into. So
 * fork is always safe, which is what IBV_FORK_UNNEEDED says (libibverbs
 * returns it on kernels whose copy-on-fork keeps pinned pages).
 */
#include <infiniband/verbs.h>

#include <stddef.h>

int ibv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}
