/**
 * The daemon's event journal as its readers must know it: the file header ({@link
 * io.mrd.layout.journal.JournalFileDescriptor}), the record and its commit rule ({@link
 * io.mrd.layout.journal.JournalRecordDescriptor}), the flyweight both sides store and read a record through
 * ({@link io.mrd.layout.journal.JournalRecord}) and the event types. The daemon writes it (primary's
 * {@code io.mrd.primary.journal}); {@code mrd events} reads it through {@code io.mrd.tools.JournalReader}.
 */
package io.mrd.layout.journal;
