/**
 * The client library a secondary process links: attach to the daemon, allocate and register memory, look
 * lkeys up.
 * <ul>
 *   <li>{@link io.mrd.secondary.MrdClient}: the API and the order of attach and close, nothing else;</li>
 *   <li>{@link io.mrd.secondary.ClientContext}: every client setting, its default and its {@code MRD_*}
 *       variable;</li>
 *   <li>{@link io.mrd.secondary.DaemonConnection}, {@code PendingReplies}, {@code ReadTurn} and
 *       {@link io.mrd.secondary.ReplyReader}: the socket to the daemon, correlation ids, the replies read by
 *       their callers in turn, timeouts, the fd exchanges (REG_EXTERNAL's out, IMPORT_PD's in);</li>
 *   <li>{@link io.mrd.secondary.DaemonWatch}: whether the daemon is still there, and why not;</li>
 *   <li>{@link io.mrd.secondary.AddressSpace}: reservations, same-address mappings, the allocation table;</li>
 *   <li>{@link io.mrd.secondary.MrCache} and {@link io.mrd.secondary.MrSource}: the per-queue lookup, after
 *       the seed's {@code mlx5_mr_ctrl}, and what it asks of the client ({@code DaemonMrSource}).</li>
 * </ul>
 * What belongs here: what a client process does and nothing the daemon needs. Rules both sides apply (the
 * liveness rule, the whole-buffer rule, the table search, the libc bindings) live in {@code shared-layout} and
 * are called from here, never copied. The verbs datapath (queues in the daemon's imported PD, posting, polling)
has a package of its own, {@code io.mrd.secondary.verbs}; {@code MrdClient.verbs()} is its door.
 */
package io.mrd.secondary;
