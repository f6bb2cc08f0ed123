/**
 * Registered buffers smaller than the daemon's 2 MiB allocations, for JVM zero-copy stacks:
 * {@link io.mrd.secondary.pool.BufferPool} (size classes, slabs of registered memory, per-thread caches; each
 * {@link io.mrd.secondary.pool.PooledBuffer} carries its keys, with an Agrona view), and Netty's side of it,
 * {@link io.mrd.secondary.pool.MrdByteBufAllocator} and {@link io.mrd.secondary.pool.MrdByteBuf}.
 */
package io.mrd.secondary.pool;
