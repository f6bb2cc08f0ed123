package io.mrd.primary.mr;

import io.mrd.layout.MrEntry;

import java.util.List;

/**
 * One MR record as the control file holds it, with its live chunks: what an {@link EngineFixture} reads back.
 */
record RecordedMr(
    int slot,
    int state,
    int lkey,
    int rkey,
    int access,
    long start,
    long end,
    int listIndex,
    int msBaseIdx,
    int msN,
    int msBmpN,
    boolean external,
    int owner,
    List<MrEntry> chunks)
{
    long length()
    {
        return end - start;
    }
}
