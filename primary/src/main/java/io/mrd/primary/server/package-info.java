/**
 * The socket server: {@code MrdServer} (Netty epoll on {@code DIR/mrd.sock}, the workers, the reclaim thread),
 * which lends each session {@code SessionServices} and nothing else of itself. One {@code ClientSession} per
 * connection cuts frames and routes requests to its parts: {@code PeerHandshake} (the peer check at connect,
 * HELLO, who may STOP), {@code FdHandshake} (the REG_EXTERNAL fd wait, with {@code PendingFd}), {@code PdImport}
 * (IMPORT_PD's reply with the device's command fd), {@code RequestDispatch} (the workers and the replies) and
 * {@code ExistingMrReply}; its state is one {@code SessionState} in its {@code SessionLifecycle}, which starts the
 * {@code ClientReclaim} of a gone client once. {@code RequestHandler} checks a request's fields and calls the
 * engine or external memory, and keeps who reported which queue of the shared device ({@code QueueOwners}) to
 * destroy a gone client's.
 * <p>
 * What belongs here: transport, peers and the decoding of requests into calls. What does not: what a request
 * does to memory or MRs ({@code memory}, {@code mr}, {@code external}), and the wire format itself
 * ({@code shared-layout}'s protocol package).
 */
package io.mrd.primary.server;
