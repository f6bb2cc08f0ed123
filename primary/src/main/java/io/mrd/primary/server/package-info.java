/**
 * The socket server: {@code MrdServer} (Netty epoll on {@code DIR/mrd.sock}, the workers, the reclaim of gone
 * clients), one {@code ClientSession} per connection (peer check, frames, requests in flight, the REG_EXTERNAL
 * fd wait in {@code PendingFd}, IMPORT_PD's reply with the device's command fd in {@code PdImport}), and
 * {@code RequestHandler}, which checks a request's fields and calls the engine or external memory, and keeps
 * who reported which queue of the shared device ({@code QueueOwners}) to destroy a gone client's.
 * <p>
 * What belongs here: transport, peers and the decoding of requests into calls. What does not: what a request
 * does to memory or MRs ({@code memory}, {@code mr}, {@code external}), and the wire format itself
 * ({@code shared-layout}'s protocol package).
 */
package io.mrd.primary.server;
