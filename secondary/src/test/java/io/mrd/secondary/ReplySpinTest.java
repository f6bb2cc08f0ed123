package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reply spin: {@link ClientContext#replySpinNs} (its default, {@code MRD_REPLY_SPIN_NS}, the values it
 * refuses), and a connection that spins still gets its replies and still times out.
 */
class ReplySpinTest
{
    @TempDir
    Path dir;

    private FakeDaemon daemon;
    private MrdClient client;

    @AfterEach
    void stop() throws Exception
    {
        if (null != client)
        {
            client.close();
        }
        if (null != daemon)
        {
            daemon.close();
        }
    }

    @Test
    void theDefaultTheVariableAndASetValueInThatOrderOfPrecedence()
    {
        assertEquals(ClientContext.DEFAULT_REPLY_SPIN_NS,
            new ClientContext().environment(Map.of()).conclude().replySpinNs());
        assertEquals(2500, new ClientContext().environment(Map.of(ClientContext.MRD_REPLY_SPIN_NS, " 2500 "))
            .conclude().replySpinNs());
        assertEquals(0, new ClientContext().environment(Map.of(ClientContext.MRD_REPLY_SPIN_NS, "0"))
            .conclude().replySpinNs(), "0 disables the spin");
        assertEquals(0, new ClientContext().replySpinNs(0)
            .environment(Map.of(ClientContext.MRD_REPLY_SPIN_NS, "2500")).conclude().replySpinNs(), "set wins");
        assertEquals(ClientContext.MAX_REPLY_SPIN_NS, new ClientContext().replySpinNs(ClientContext.MAX_REPLY_SPIN_NS)
            .environment(Map.of()).conclude().replySpinNs());
        assertTrue(new ClientContext().replySpinNs(700).environment(Map.of()).conclude().toString()
            .contains("replySpinNs=700"));
    }

    @Test
    void badValuesAreRefusedNamingTheVariableOrTheSetting()
    {
        for (final String bad : new String[] {"soon", "-1", "1000001", "1.5"})
        {
            final MrdException ex = assertThrows(MrdException.class, () -> new ClientContext()
                .environment(Map.of(ClientContext.MRD_REPLY_SPIN_NS, bad)).conclude(), bad);
            assertEquals(ErrorCode.EINVAL, ex.code());
            assertTrue(ex.getMessage().startsWith("MRD_REPLY_SPIN_NS='" + bad + "'"), ex.getMessage());
            assertTrue(ex.getMessage().contains("0 (park at once) to 1000000"), ex.getMessage());
        }
        final MrdException set = assertThrows(MrdException.class,
            () -> new ClientContext().replySpinNs(-5).environment(Map.of()).conclude());
        assertEquals(ErrorCode.EINVAL, set.code());
        assertEquals("reply spin -5 ns must be 0 (park at once) to 1000000 ns", set.getMessage());
    }

    @Test
    void aSpinningClientGetsItsRepliesAndStillTimesOut() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(300)
            .replySpinNs(ClientContext.MAX_REPLY_SPIN_NS).environment(Map.of()));
        final MrCache cache = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));
        daemon.answerCreates = false;
        final long high = FakeDaemon.BASE + FakeDaemon.LIST_LENGTH / 2;
        final MrdException ex = assertThrows(MrdException.class, () -> cache.lkey(high, 8));
        assertEquals(ErrorCode.ETIMEDOUT, ex.code(), ex::getMessage);
        daemon.answerCreates = true;
        assertEquals(FakeDaemon.HIGH_LKEY, cache.lkey(high, 8));
    }
}
