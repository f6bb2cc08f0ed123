package io.mrd.layout.journal;

/**
 * One committed journal record, as a reader returns it ({@link JournalEventType} says what each field means).
 *
 * @param lap      the lap of the file it was read from.
 * @param sequence its index in that lap (0 is the first record of the file).
 * @param type     what happened; null for a code this reader does not know.
 */
public record JournalEvent(
    long lap,
    int sequence,
    JournalEventType type,
    int typeCode,
    int flags,
    long timeNs,
    int client,
    int arg,
    long address,
    long length,
    int lkey,
    int rkey,
    long value)
{
}
