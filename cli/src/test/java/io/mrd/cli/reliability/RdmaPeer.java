package io.mrd.cli.reliability;

import io.mrd.cli.rdma.RdmaExchange;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrdClient;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * One of the two peers of {@link RdmaEndToEndTest}: {@code DIR NAME PEER_NAME EXCHANGE SECONDS}. Attaches and
 * runs an {@link RdmaExchange} with the peer named PEER_NAME for SECONDS, printing its {@code connected},
 * {@code progress} and {@code error} lines and at the end {@code result wrs=.. bytesVerified=.. wrongBytes=..
 * liveProtectionErrors=.. otherErrors=.. staleProbes=.. staleRefused=.. staleTargetsChecked=.. rotations=..
 * rotationsSameAddress=.. firstError=..}; exits 0 when it got that far.
 */
public final class RdmaPeer
{
    private RdmaPeer()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final String name = args[1];
        final PrintWriter out = new PrintWriter(System.out, true);
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name(name)))
        {
            final RdmaExchange exchange = new RdmaExchange(client, name, out);
            exchange.connect(Path.of(args[3]), args[2]);
            exchange.run(TimeUnit.SECONDS.toNanos(Long.parseLong(args[4])));
            final RdmaExchange.Result r = exchange.result();
            out.println("result wrs=" + r.wrs() + " bytesVerified=" + r.bytesVerified() + " wrongBytes=" +
                r.wrongBytes() + " liveProtectionErrors=" + r.protectionErrors() + " otherErrors=" + r.otherErrors() +
                " staleProbes=" + r.staleKeyRequests() + " staleRefused=" + r.staleKeyRefusals() +
                " staleTargetsChecked=" + r.staleTargetsChecked() + " rotations=" + r.rotations() +
                " rotationsSameAddress=" + r.rotationsSameAddress() + " unboundTransfers=" + r.unboundTransfers() +
                " firstError=" +
                (r.firstError().isEmpty() ? "none" : r.firstError().replace(' ', '_')));
        }
        System.exit(0);
    }
}
