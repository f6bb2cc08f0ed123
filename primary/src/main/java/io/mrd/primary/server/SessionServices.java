package io.mrd.primary.server;

import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;

import java.util.concurrent.Executor;
import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;

/**
 * What the server lends every {@link ClientSession}: the sessions share these, and use nothing else of the
 * server. Each is thread-safe unless said otherwise.
 *
 * @param peerPolicy      who may connect and who may STOP the daemon.
 * @param clients         the control file's client table, where HELLO takes a slot.
 * @param clientIds       the next client id; ids are never reused within a daemon's life.
 * @param handler         runs requests, on the workers.
 * @param existingMrReply    the CREATE_MRs the event loop answers itself; event loop only.
 * @param workers         where requests run; refuses work when its queue is full or the server is closing.
 * @param reclaim         frees what a gone client owned.
 * @param counters        the daemon's counters and histograms.
 * @param journal         the event journal (clients attached, refused, disconnected).
 * @param refusals        the rate-limited log of refused peers and requests.
 * @param failures        where bugs are recorded.
 * @param serverClosing   true once the server is closing: CREATE_MR goes to the workers (see RequestDispatch).
 * @param stop            what a permitted STOP runs once its reply is written (failures are recorded).
 * @param handover        what a permitted STOP with {@code FLAG_HANDOVER} runs instead ({@code mrd restart}).
 * @param epoch           the daemon's epoch, told in WELCOME.
 * @param controlFilePath the control file's absolute path, told in WELCOME.
 * @param adopted         the clients of the daemon this one adopted, which may resume (none when started afresh).
 */
record SessionServices(
    PeerPolicy peerPolicy,
    ClientTable clients,
    IntSupplier clientIds,
    RequestHandler handler,
    ExistingMrReply existingMrReply,
    Executor workers,
    ClientReclaim reclaim,
    DaemonCounters counters,
    EventJournal journal,
    RefusalLog refusals,
    FailureLog failures,
    BooleanSupplier serverClosing,
    Runnable stop,
    Runnable handover,
    long epoch,
    String controlFilePath,
    AdoptedClients adopted)
{
}
