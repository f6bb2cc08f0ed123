package io.mrd.bench.multi;

/**
 * A child's work between a {@code start K ...} and a {@code stop} command: one thread looping until asked to
 * stop, joined by the stop, so that what it measured is safe to read afterwards.
 */
final class Background
{
    private final String threadName;
    private volatile boolean stopping;
    private Thread thread;
    private String run;

    Background(final String threadName)
    {
        this.threadName = threadName;
    }

    boolean running()
    {
        return null != thread;
    }

    /**
     * @return whether the loop should end: polled by the work.
     */
    boolean stopping()
    {
        return stopping;
    }

    void start(final String runNumber, final Runnable work)
    {
        run = runNumber;
        stopping = false;
        thread = new Thread(work, threadName);
        thread.start();
    }

    /**
     * Asks the work to end and waits for it; nothing to do when none runs.
     *
     * @return the number of the run that ended (null when none ran).
     */
    String stop() throws InterruptedException
    {
        stopping = true;
        if (null != thread)
        {
            thread.join();
            thread = null;
        }
        return run;
    }
}
