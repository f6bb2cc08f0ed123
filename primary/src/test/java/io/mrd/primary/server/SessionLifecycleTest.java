package io.mrd.primary.server;

import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The session's transitions on their own, and the one race they settle: the reclaim starts once, whether the
 * channel's close or the last request's end comes second.
 */
class SessionLifecycleTest
{
    @Test
    void aClosedChannelWithNothingInFlightIsReclaimedAtOnceAndOnce()
    {
        final AtomicInteger reclaims = new AtomicInteger();
        final SessionLifecycle lifecycle = new SessionLifecycle(new EmbeddedChannel(), reclaims::incrementAndGet);
        assertTrue(lifecycle.answers());
        lifecycle.channelClosed();
        lifecycle.channelClosed();
        assertEquals(SessionState.FINISHED, lifecycle.state());
        assertEquals(1, reclaims.get());
        assertFalse(lifecycle.answers());
        assertFalse(lifecycle.giveUp(), "nothing to give up once closed");
    }

    @Test
    void theLastRequestOfAClosedChannelStartsTheReclaim()
    {
        final AtomicInteger reclaims = new AtomicInteger();
        final SessionLifecycle lifecycle = new SessionLifecycle(new EmbeddedChannel(), reclaims::incrementAndGet);
        lifecycle.requestStarted();
        lifecycle.requestStarted();
        lifecycle.channelClosed();
        assertEquals(SessionState.CLOSED, lifecycle.state());
        lifecycle.requestFinished();
        assertEquals(0, reclaims.get(), "one still in flight");
        lifecycle.requestFinished();
        assertEquals(SessionState.FINISHED, lifecycle.state());
        assertEquals(1, reclaims.get());
    }

    @Test
    void givingUpStopsAnswersAndHappensOnce()
    {
        final SessionLifecycle lifecycle = new SessionLifecycle(new EmbeddedChannel(), () -> { });
        assertTrue(lifecycle.inputShut());
        assertEquals(SessionState.DRAINING, lifecycle.state());
        assertTrue(lifecycle.answers(), "a drained session still answers what is in flight");
        assertTrue(lifecycle.giveUp());
        assertFalse(lifecycle.giveUp());
        assertTrue(lifecycle.givenUp());
        assertFalse(lifecycle.inputShut(), "a session given up stays so");
        assertEquals(SessionState.CLOSING, lifecycle.state());
    }

    @Test
    void aDrainedSessionClosesAfterItsLastReply()
    {
        final EmbeddedChannel channel = new EmbeddedChannel();
        final SessionLifecycle lifecycle = new SessionLifecycle(channel, () -> { });
        lifecycle.requestStarted();
        lifecycle.inputShut();
        lifecycle.closeIfIdle();
        assertTrue(channel.isOpen(), "a request is still in flight");
        lifecycle.requestFinished();
        assertFalse(channel.isOpen());
    }

    @Test
    void theCloseAndTheLastRequestRacingReclaimOnce() throws InterruptedException
    {
        for (int round = 0; round < 2_000; round++)
        {
            final AtomicInteger reclaims = new AtomicInteger();
            final SessionLifecycle lifecycle = new SessionLifecycle(new EmbeddedChannel(), reclaims::incrementAndGet);
            lifecycle.requestStarted();
            final CountDownLatch go = new CountDownLatch(1);
            final Thread worker = Thread.ofPlatform().start(() ->
            {
                awaitQuietly(go);
                lifecycle.requestFinished();
            });
            go.countDown();
            lifecycle.channelClosed();
            worker.join();
            assertEquals(1, reclaims.get(), "round " + round);
            assertEquals(SessionState.FINISHED, lifecycle.state());
        }
    }

    private static void awaitQuietly(final CountDownLatch latch)
    {
        try
        {
            latch.await();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
