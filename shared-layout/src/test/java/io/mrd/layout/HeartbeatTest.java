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
        assertTrue(Heartbeat.isAlive(header, 15_000), "exactly at the limit is alive");
        assertNull(Heartbeat.deathReason(header, 15_000));
        assertFalse(Heartbeat.isAlive(header, 15_001));
        assertEquals("died (heartbeat 5001 ms old, limit 5000 ms)", Heartbeat.deathReason(header, 15_001));
    }

    @Test
    void aHeaderWithoutALimitGetsTheDefaultIntervalsLimit()
    {
        header.heartbeatStaleLimitMs(0).heartbeatMs(1_000);
        assertEquals((long)Heartbeat.STALE_INTERVALS * Heartbeat.DEFAULT_INTERVAL_MS, Heartbeat.staleLimitMs(header));
        assertTrue(Heartbeat.isAlive(header, 1_000 + Heartbeat.staleLimitMs(header)));
        assertFalse(Heartbeat.isAlive(header, 1_001 + Heartbeat.staleLimitMs(header)));
    }

    @Test
    void aClosedHeartbeatIsNeverAliveAndAClockStepBackIsAgeZero()
    {
        header.heartbeatStaleLimitMs(1_000).heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
        assertEquals(Heartbeat.CLOSED, Heartbeat.ageMs(header, 5_000));
        assertFalse(Heartbeat.isAlive(header, 5_000));
        assertEquals("stopped (heartbeat closed)", Heartbeat.deathReason(header, 5_000));
        header.heartbeatMs(9_000);
        assertEquals(0, Heartbeat.ageMs(header, 8_000));
        assertTrue(Heartbeat.isAlive(header, 8_000));
    }
}
