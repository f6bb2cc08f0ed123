package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The server's small parts on their own: the refusal log's rate limit, the peer policy, the client name
 * cleaning.
 */
class ServerPartsTest
{
    @Test
    void refusalLogWritesTenLinesASecondThenASummary()
    {
        final AtomicLong now = new AtomicLong(1_000);
        final List<String> lines = new ArrayList<>();
        final RefusalLog log = new RefusalLog(lines::add, now::get, 10);
        for (int i = 0; i < 25; i++)
        {
            log.refused("refused " + i);
        }
        assertEquals(10, lines.size());
        log.flush();
        assertEquals(10, lines.size());
        now.addAndGet(1_000);
        log.flush();
        assertEquals(11, lines.size());
        assertEquals("15 more refused in the last second", lines.get(10));
        log.refused("next");
        assertEquals("next", lines.get(11));
        now.addAndGet(5_000);
        log.flush();
        assertEquals(12, lines.size(), "no summary when nothing was left out");
    }

    @Test
    void peerPolicyAdmitsTheDaemonsUidRootAndAllowedGroups()
    {
        final PeerPolicy policy = new PeerPolicy(1000, List.of(50));
        assertNull(policy.refusal(1, 1000, new int[]{1000}));
        assertNull(policy.refusal(1, 0, new int[]{0}));
        assertNull(policy.refusal(1, 2000, new int[]{2000, 50}));
        final String refusal = policy.refusal(77, 2000, new int[]{2000, 51});
        assertTrue(refusal.contains("pid 77 uid 2000") && refusal.contains("--allow-gid"), refusal);
        assertTrue(policy.mayStop(1000) && policy.mayStop(0));
        assertTrue(!policy.mayStop(2000), "a group never grants STOP");
    }

    @Test
    void namesAreCleanedForTheLog()
    {
        assertEquals("worker ?forged? line", ClientTable.printable("worker \nforged\u00e9 line"));
        assertEquals(32, ClientTable.printable("x".repeat(100)).length());
    }
}
