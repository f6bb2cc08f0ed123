package io.mrd.secondary.pool;

import java.lang.foreign.MemorySegment;

/**
 * A registered allocation a {@link SlabSource} gave: the memory and the keys of the one MR that holds all of
 * it, valid until the source frees it.
 *
 * @param segment the memory.
 * @param lkey    the lkey of its MR.
 * @param rkey    the rkey of its MR, {@link io.mrd.layout.Access#NO_RKEY} without remote access.
 */
public record SlabMemory(MemorySegment segment, int lkey, int rkey)
{
}
