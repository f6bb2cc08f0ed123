package io.mrd.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.Format;

import java.time.Instant;

/**
 * How {@code mrd events} prints one journal event: a line of text, or ({@code --json}) one JSON object whose
 * keys are stable. As in {@code mrd dump --json}, addresses, keys and the epoch are {@code "0x…"} strings;
 * ids, pids, lengths and devGen are numbers. Only the fields the event's type defines are printed.
 */
final class EventFormat
{
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private EventFormat()
    {
    }

    static String time(final JournalEvent event)
    {
        return Instant.ofEpochSecond(0, event.timeNs()).toString();
    }

    static String type(final JournalEvent event)
    {
        return null == event.type() ? "TYPE_" + event.typeCode() : event.type().name();
    }

    static String text(final JournalEvent event)
    {
        final StringBuilder line = new StringBuilder(120);
        line.append(time(event)).append(' ').append(String.format("%-21s", type(event)));
        if (null == event.type())
        {
            return line.append(" (a type this mrd does not know)").toString();
        }
        switch (event.type())
        {
            case DAEMON_STARTED -> line.append(" pid ").append(event.arg()).append(" epoch ")
                .append(Sizes.hex(event.value())).append(" journal ")
                .append(event.length() == 0 ? "off" : Sizes.format(event.length()));
            case DAEMON_STOPPED -> line.append(" pid ").append(event.arg()).append(" epoch ")
                .append(Sizes.hex(event.value()));
            case CLIENT_ATTACHED -> line.append(" client ").append(event.client()).append(" pid ").append(event.arg())
                .append(" uid ").append(event.value());
            case CLIENT_REFUSED -> line.append(" pid ").append(event.arg()).append(" uid ").append(event.value())
                .append(' ').append(ErrorCode.of(event.flags()).name());
            case CLIENT_DISCONNECTED -> line.append(" client ").append(event.client()).append(" pid ")
                .append(event.arg());
            case ALLOC -> range(line.append(" client ").append(event.client()), event).append(" access ")
                .append(Access.describe(event.flags()));
            case FREE -> range(line.append(" client ").append(event.client()), event);
            case MR_CREATED, MR_DETACHED, MR_DEREGISTERED ->
            {
                keys(range(line.append(" client ").append(event.client()), event), event);
                if ((event.flags() & MrDescriptor.FLAG_EXTERNAL) != 0)
                {
                    line.append(" external");
                }
            }
            case MR_DEVICE_KEYS -> keys(range(line.append(" client ").append(event.client()), event), event)
                .append(" device ").append(event.value());
            case MEMORY_EVENT -> range(line, event).append(" devGen ").append(event.value());
            case EXTERNAL_DEREGISTERED -> line.append(" client ").append(event.client()).append(" at ")
                .append(Sizes.hex(event.address()));
            case CACHE_OVERFLOW -> line.append(" capacity ").append(event.value());
            case CACHE_REBUILT -> line.append(" entries ").append(event.value())
                .append(event.flags() != 0 ? " (still overflowing)" : "");
        }
        return line.toString();
    }

    /** The keys and slot of an MR event, one device's. */
    private static StringBuilder keys(final StringBuilder line, final JournalEvent event)
    {
        return line.append(" lkey ").append(Format.key(event.lkey())).append(" rkey ").append(Format.key(event.rkey()))
            .append(" mr ").append(event.arg());
    }

    private static StringBuilder range(final StringBuilder line, final JournalEvent event)
    {
        return line.append(" [").append(Sizes.hex(event.address())).append(", ")
            .append(Sizes.hex(event.address() + event.length())).append(") ").append(Sizes.format(event.length()));
    }

    static String json(final JournalEvent event)
    {
        final ObjectNode node = MAPPER.createObjectNode();
        node.put("time", time(event));
        node.put("timeNs", event.timeNs());
        node.put("type", type(event));
        if (null != event.type())
        {
            switch (event.type())
            {
                case DAEMON_STARTED, DAEMON_STOPPED ->
                {
                    node.put("pid", event.arg());
                    node.put("epoch", Sizes.hex(event.value()));
                }
                case CLIENT_ATTACHED -> node.put("client", event.client()).put("pid", event.arg())
                    .put("uid", event.value());
                case CLIENT_DISCONNECTED -> node.put("client", event.client()).put("pid", event.arg());
                case CLIENT_REFUSED ->
                {
                    node.put("pid", event.arg());
                    node.put("uid", event.value());
                    node.put("error", ErrorCode.of(event.flags()).name());
                }
                case ALLOC, FREE -> range(node.put("client", event.client()), event);
                case MR_CREATED, MR_DETACHED, MR_DEREGISTERED ->
                {
                    keys(range(node.put("client", event.client()), event), event)
                        .put("external", (event.flags() & MrDescriptor.FLAG_EXTERNAL) != 0);
                }
                case MR_DEVICE_KEYS -> keys(range(node.put("client", event.client()), event), event)
                    .put("device", event.value());
                case MEMORY_EVENT -> range(node, event).put("devGen", event.value());
                case EXTERNAL_DEREGISTERED -> node.put("client", event.client())
                    .put("address", Sizes.hex(event.address()));
                case CACHE_OVERFLOW -> node.put("capacity", event.value());
                case CACHE_REBUILT -> node.put("entries", event.value()).put("overflow", event.flags() != 0);
            }
        }
        return node.toString();
    }

    private static ObjectNode keys(final ObjectNode node, final JournalEvent event)
    {
        return node.put("lkey", Format.key(event.lkey())).put("rkey", Format.key(event.rkey())).put("mr", event.arg());
    }

    private static ObjectNode range(final ObjectNode node, final JournalEvent event)
    {
        return node.put("address", Sizes.hex(event.address())).put("length", event.length());
    }
}
