package io.mrd.primary.server;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * What a test client's reader received, in order: decoded frames, {@link RawClient#EOF}, or the exception
 * that stopped it.
 */
final class ReplyQueue
{
    private final BlockingQueue<Object> received = new LinkedBlockingQueue<>();

    void add(final Object item)
    {
        received.add(item);
    }

    /**
     * @return the next item; fails the test when none comes within {@link ServerFixture#WAIT} or the reader
     * failed.
     */
    Object next()
    {
        try
        {
            final Object next = received.poll(ServerFixture.WAIT.toSeconds(), TimeUnit.SECONDS);
            if (null == next)
            {
                fail("no reply within " + ServerFixture.WAIT.toSeconds() + " s");
            }
            if (next instanceof Throwable t)
            {
                fail("reading replies failed", t);
            }
            return next;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }
}
