package io.mrd.layout;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HeartbeatTest
{
    private final ControlHeader header =
        new ControlHeader().wrap(new UnsafeBuffer(ByteBuffer.allocateDirect(HeaderDescriptor.HEADER_LENGTH)));

    @Test
    void judgesByThePublishedLimit()
    {
        header.heartbeatIntervalMs(500).heartbeatStaleLimitMs(Heartbeat.staleLimitMs(500)).heartbeatMs(10_000);
        assertEquals(5_000, Heartbeat.staleLimitMs(header));
        assertEquals(new Heartbeat.State(Heartbeat.Liveness.ALIVE, 5_000, 5_000), Heartbeat.look(header, 15_000),
            "exactly at the limit is alive");
        assertNull(Heartbeat.look(header, 15_000).reason());
        assertTrue(Heartbeat.look(header, 15_001).isStale());
        assertEquals("died (heartbeat 5001 ms old, limit 5000 ms)", Heartbeat.look(header, 15_001).reason());
        assertEquals(Heartbeat.look(header, 15_001), Heartbeat.state(10_000, 5_000, 15_001),
            "a look judges what it read as a snapshot's values are judged");
    }

    @Test
    void aHeaderWithoutALimitGetsTheDefaultIntervalsLimit()
    {
        header.heartbeatStaleLimitMs(0).heartbeatMs(1_000);
        assertEquals((long)Heartbeat.STALE_INTERVALS * Heartbeat.DEFAULT_INTERVAL_MS, Heartbeat.staleLimitMs(header));
        assertTrue(Heartbeat.look(header, 1_000 + Heartbeat.staleLimitMs(header)).isAlive());
        assertTrue(Heartbeat.look(header, 1_001 + Heartbeat.staleLimitMs(header)).isStale());
    }

    @Test
    void aClosedHeartbeatIsNeverAliveAndAClockStepBackIsAgeZero()
    {
        header.heartbeatStaleLimitMs(1_000).heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
        assertEquals(Heartbeat.CLOSED, Heartbeat.ageMs(header, 5_000));
        assertTrue(Heartbeat.look(header, 5_000).isClosed());
        assertFalse(Heartbeat.look(header, 5_000).isAlive());
        assertEquals("stopped (heartbeat closed)", Heartbeat.look(header, 5_000).reason());
        header.heartbeatMs(9_000);
        assertEquals(0, Heartbeat.ageMs(header, 8_000));
        assertTrue(Heartbeat.look(header, 8_000).isAlive());
    }
}
