package io.mrd.primary.memory;

/**
 * A run of segments inside one list, as found under the memory lock before anything is done with it (a free's
 * candidate, checked against the holds before it is taken out of use).
 *
 * @param listIndex    the list the run lies in.
 * @param firstSegment index of the run's first segment in the list.
 * @param segmentCount segments in the run.
 */
record SegmentRun(int listIndex, int firstSegment, int segmentCount)
{
}
