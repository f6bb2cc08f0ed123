package io.mrd.secondary;

/**
 * Waiting for the client's own threads (the watchdog, the hang-up watch, a reader) to end.
 */
final class Threads
{
    private Threads()
    {
    }

    /**
     * Waits for {@code thread} to end, however often this thread is interrupted meanwhile, and keeps this thread's
     * interrupt status: a close must not leave a thread running that still uses what it is about to release.
     */
    static void join(final Thread thread)
    {
        boolean interrupted = false;
        while (thread.isAlive())
        {
            try
            {
                thread.join();
            }
            catch (final InterruptedException ex)
            {
                interrupted = true;
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
    }
}
