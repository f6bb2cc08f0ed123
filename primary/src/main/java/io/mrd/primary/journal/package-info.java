/**
 * The daemon's event journal: {@link io.mrd.primary.journal.EventJournal}, what the engine, the memory manager
 * and the server call where registrations or ownership change, and {@link
 * io.mrd.primary.journal.MappedEventJournal}, its Chronicle Bytes implementation over the files of {@code
 * io.mrd.layout.journal}.
 */
package io.mrd.primary.journal;
