/**
 * The daemon's event journal as its readers must know it: the file header ({@link
 * io.mrd.layout.journal.JournalFileDescriptor}), the record and its commit rule ({@link
 * io.mrd.layout.journal.JournalRecordDescriptor}) and the event types. The daemon writes it (primary's
 * {@code io.mrd.primary.journal}); {@code mrd events} reads it through {@code io.mrd.tools.JournalReader}.
 */
package io.mrd.layout.journal;
