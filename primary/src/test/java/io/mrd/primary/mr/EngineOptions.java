package io.mrd.primary.mr;

import io.mrd.primary.provider.ProviderConfig;

/**
 * What an {@link EngineFixture}'s engine is built with; defaults: 2 lists of 16 segments of 2 MiB, 64 MRs, 1024
 * cache entries, {@code --mr-ext-memseg}, the soft provider without limits.
 */
record EngineOptions(
    long base,
    int lists,
    int segmentsPerList,
    long segmentSize,
    int mrCapacity,
    int cacheCapacity,
    boolean extendToContiguousChunk,
    ProviderConfig provider)
{
    static EngineOptions at(final long base)
    {
        return new EngineOptions(base, 2, 16, EngineFixture.SEGMENT, 64, 1024, true, ProviderConfig.defaults());
    }

    EngineOptions geometry(final int lists, final int segmentsPerList, final long segmentSize)
    {
        return new EngineOptions(base, lists, segmentsPerList, segmentSize, mrCapacity, cacheCapacity,
            extendToContiguousChunk, provider);
    }

    EngineOptions mrCapacity(final int mrCapacity)
    {
        return new EngineOptions(base, lists, segmentsPerList, segmentSize, mrCapacity, cacheCapacity,
            extendToContiguousChunk, provider);
    }

    EngineOptions cacheCapacity(final int cacheCapacity)
    {
        return new EngineOptions(base, lists, segmentsPerList, segmentSize, mrCapacity, cacheCapacity,
            extendToContiguousChunk, provider);
    }

    EngineOptions extend(final boolean extendToContiguousChunk)
    {
        return new EngineOptions(base, lists, segmentsPerList, segmentSize, mrCapacity, cacheCapacity,
            extendToContiguousChunk, provider);
    }

    EngineOptions provider(final ProviderConfig provider)
    {
        return new EngineOptions(base, lists, segmentsPerList, segmentSize, mrCapacity, cacheCapacity,
            extendToContiguousChunk, provider);
    }
}
