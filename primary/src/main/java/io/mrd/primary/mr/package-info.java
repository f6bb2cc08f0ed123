/**
 * The MR engine, following the reference's {@code mlx5_common_mr.c}. {@code MrEngine} is what requests call; it
 * creates MRs through {@code MrCreation} (the steps of {@code mlx5_mr_create_primary}, one method each) and
 * registers external memory through {@code ExternalMrs}. Both, and the engine, call into {@code MrShareCache}
 * (the reference's {@code mlx5_mr_share_cache}), the one owner of what they share: the cache lock, the MR slot
 * table ({@code MrTable}), the one writer of the global cache and owner of the seqlock's write side
 * ({@code GlobalCacheWriter}, the mirror of {@code GlobalCacheReader}), the ranges being registered
 * ({@code InFlightRanges}), the closed flag, the publish of an MR, the memory free event's
 * part under the lock ({@code mlx5_mr_mem_event_free_cb}; the engine is the memory manager's listener) and the
 * collection of detached MRs ({@code MrCollector}). Calls run that one way: nothing there calls back up.
 * <p>
 * Lock order (written out in {@code MrShareCache}): the memory lock (inside the memory manager), then the cache
 * lock, then the seqlock's write side. Nothing is registered under any of them (a segment hold and an in-flight
 * range stand in); nothing is deregistered or unmapped under any lock.
 * <p>
 * What does not belong here: how memory is allocated and mapped ({@code memory}, {@code external}), how a
 * registration is made ({@code provider}), and requests ({@code server}).
 */
package io.mrd.primary.mr;
