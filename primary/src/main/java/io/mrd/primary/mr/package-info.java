/**
 * The MR engine, following the reference's {@code mlx5_common_mr.c}: {@code MrEngine} creates MRs (the steps of
 * {@code mlx5_mr_create_primary} are {@code MrCreation}'s, the ranges being registered {@code InFlightRanges}),
 * takes freed memory out of them ({@code mlx5_mr_mem_event_free_cb}, as a listener of the memory manager) and
 * collects detached MRs; {@code MrTable} is the MR slot table,
 * {@code GlobalCacheWriter} the one writer of the global cache and owner of the seqlock's write side (the
 * mirror of {@code GlobalCacheReader}), {@code ExternalMrs} the MRs over external memory.
 * <p>
 * Lock order: the memory lock (inside the memory manager), then the engine's cache lock, then the seqlock's
 * write side. Nothing is registered under any of them (a segment hold and an in-flight range stand in, see
 * {@code MrEngine}); nothing is deregistered or unmapped under any lock.
 * <p>
 * What does not belong here: how memory is allocated and mapped ({@code memory}, {@code external}), how a
 * registration is made ({@code provider}), and requests ({@code server}).
 */
package io.mrd.primary.mr;
