package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.Equipment;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.mrd.primary.DaemonSettings.ALLOW_GID;
import static io.mrd.primary.server.MrdServerTest.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The daemon's own peer check, with a peer of another uid: a child started by {@code setpriv} as nobody
 * (65534), after the socket and its directory are opened up so that only the daemon's check stands in the
 * way. Needs root (to change uid), setpriv and a python3 that nobody may run.
 */
class PeerCredentialsTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int NOBODY = 65534;
    /** Connects, sends argv[2] (hex) if given, prints the first argv[3] (default 1) frames that come back, in hex. */
    private static final String CLIENT = String.join("\n",
        "import socket, sys",
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
        "s.settimeout(15)",
        "s.connect(sys.argv[1])",
        // A refused peer may find the connection closed before it sends: what the daemon said is still there to read.
        "if len(sys.argv) > 2 and sys.argv[2]:",
        "    try: s.sendall(bytes.fromhex(sys.argv[2]))",
        "    except BrokenPipeError: pass",
        "def read(n):",
        "    data = b''",
        "    while len(data) < n:",
        "        chunk = s.recv(n - len(data))",
        "        if not chunk: break",
        "        data += chunk",
        "    return data",
        "for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):",
        "    head = read(4)",
        "    rest = read(int.from_bytes(head, 'little') - 4) if len(head) == 4 else b''",
        "    print((head + rest).hex())");

    @TempDir
    Path dir;

    @Test
    void aPeerOfAnotherUidIsRefusedAndCounted() throws Exception
    {
        assumeCanChangeUid();
        try (ServerFixture fixture = new ServerFixture(dir, BASE))
        {
            openUp(fixture);
            final Message.Status status = assertInstanceOf(Message.Status.class,
                runAsNobody(fixture, null, 1).getFirst().message());
            assertEquals(MessageType.ERROR, status.type());
            assertEquals(ErrorCode.EPERM, status.status());
            assertContains(status.message(), "uid " + NOBODY);
            assertContains(status.message(), "--allow-gid");
            assertEquals(1, fixture.counter(MrdCounter.PEERS_REJECTED));
            assertEquals(0, fixture.daemon.server().connectedClients());
        }
    }

    @Test
    void anAllowedGroupIsAdmittedButMayNotStopTheDaemon() throws Exception
    {
        assumeCanChangeUid();
        try (ServerFixture fixture = new ServerFixture(dir, BASE, context -> context.set(ALLOW_GID, List.of(NOBODY))))
        {
            openUp(fixture);
            final byte[] helloThenStop = MrdServerTest.concat(
                RawClient.encode(7, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "nobody")),
                RawClient.encode(8, new Message.Stop()));
            final List<Frame> frames = runAsNobody(fixture, HexFormat.of().formatHex(helloThenStop), 2);
            assertEquals(7, frames.get(0).correlationId());
            final Message.Welcome welcome = assertInstanceOf(Message.Welcome.class, frames.get(0).message());
            assertEquals(ErrorCode.OK, welcome.status());
            assertEquals(8, frames.get(1).correlationId());
            final Message.Status stop = assertInstanceOf(Message.Status.class, frames.get(1).message());
            assertEquals(MessageType.STOP, stop.type());
            assertEquals(ErrorCode.EPERM, stop.status());
            assertContains(stop.message(), "uid " + NOBODY);
            assertEquals(0, fixture.counter(MrdCounter.PEERS_REJECTED));
            assertFalse(fixture.daemon.awaitClosed(0, TimeUnit.SECONDS), "the daemon still runs");
        }
    }

    private static void assumeCanChangeUid()
    {
        Equipment.root("start a peer of another uid");
        Equipment.systemProgram("setpriv");
        Equipment.systemProgram("python3");
    }

    private void openUp(final ServerFixture fixture) throws IOException
    {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        for (Path parent = dir.getParent(); null != parent; parent = parent.getParent())
        {
            assumeTrue(PosixFilePermissions.toString(Files.getPosixFilePermissions(parent)).endsWith("x"),
                parent + " is not searchable by others");
        }
        Files.setPosixFilePermissions(fixture.socket(), PosixFilePermissions.fromString("rw-rw-rw-"));
    }

    private List<Frame> runAsNobody(final ServerFixture fixture, final String sendHex, final int frames)
        throws Exception
    {
        final List<String> command = new ArrayList<>(List.of(Equipment.systemProgram("setpriv").toString(), "--reuid",
            String.valueOf(NOBODY), "--regid", String.valueOf(NOBODY), "--clear-groups",
            Equipment.systemProgram("python3").toString(), "-c",
            CLIENT, fixture.socket().toString(), null == sendHex ? "" : sendHex, String.valueOf(frames)));
        final Path err = dir.resolve("child.err");
        final Process process = new ProcessBuilder(command).redirectError(err.toFile()).start();
        final String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
        if (!process.waitFor(ServerFixture.WAIT.toSeconds(), TimeUnit.SECONDS))
        {
            process.destroyForcibly();
            fail("the child did not finish");
        }
        final List<String> lines = out.lines().filter(l -> !l.isBlank()).toList();
        if (process.exitValue() != 0 || lines.size() != frames)
        {
            fail("child exit " + process.exitValue() + ", output '" + out + "', errors: " + Files.readString(err));
        }
        final List<Frame> result = new ArrayList<>();
        for (final String line : lines)
        {
            final byte[] bytes = HexFormat.of().parseHex(line.trim());
            result.add(FrameCodec.decodeReply(new UnsafeBuffer(bytes), 0, bytes.length));
        }
        return result;
    }
}
