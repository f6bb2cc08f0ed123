/**
 * What the daemon and its clients must agree on to share the control file {@code mrd.ctl}, and nothing else.
 * <p>
 * Belongs here: one {@code *Descriptor} per section (offsets as constants, the record drawn as a ruler above
 * the class) with its flyweight ({@code *Record}, {@code ControlHeader}) and {@code ControlFileLayout}; the
 * {@code SeqLock} and {@code SortedTable} that are the only writer protocol and the only search of the shared
 * table; {@code GlobalCacheReader} and {@code MrChunks}, the reader side both processes run; the rules both
 * sides apply and must apply alike ({@code Heartbeat}: when a daemon counts as dead; {@code WholeBuffer}: when a
 * buffer fits an MR; {@code RunDirectoryPath}: where the run directory is); the counters' ids
 * ({@code MrdCounter}) and the one error type ({@code MrdException}, {@code ErrorCode}).
 * <p>
 * Does not belong here: anything only one side runs (the daemon's writer of the global cache is in
 * {@code primary}, the client's caches in {@code secondary}); what tools and tests read from outside a daemon
 * (the snapshot, the invariants, formatting: {@code io.mrd.tools}). A change to what is laid out bumps
 * {@code HeaderDescriptor.LAYOUT_VERSION}.
 */
package io.mrd.layout;
