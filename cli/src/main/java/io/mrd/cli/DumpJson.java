package io.mrd.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.mrd.layout.Access;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.DeviceSnapshot;
import io.mrd.tools.Format;

import java.time.Instant;
import java.util.List;

/**
 * {@code mrd dump --json}: the snapshot as a JSON document whose keys are stable (scripts and tests parse
 * them). Addresses, keys and the epoch are {@code "0x…"} strings (64-bit values do not survive a JSON number
 * in every reader); counts, indices, ids and pids are numbers.
 * <pre>
 * daemon      {pid, epoch, devGen, heartbeatAgeMs, provider, device, pdHandle, adoptedEpoch,
 *              devices [{number, name, pdHandle}], ...}
 * memsegLists [{index, baseVa, segmentSize, segments, allocated [{start, end, owner, access, ...}], ...}]
 * mrs         [{index, state, lkey, rkey, access, start, end, msN, external, deviceHandle, chunks [...],
 *              keys [{device, name, placed, lkey, rkey, deviceHandle}], ...}]
 * cache       {len, capacity, overflow, entries [{start, end, lkey, rkey, access, mr}]}
 * clients     [{id, pid, uid, ...}]
 * </pre>
 * {@code cache.len} and {@code cache.capacity} count the sentinel entry 0 as the header does; {@code entries}
 * leaves it out, so it has {@code len - 1} elements. {@code heartbeatAgeMs} is -1 after a clean shutdown.
 * {@code device}, {@code pdHandle}, an MR's {@code lkey}, {@code rkey} and {@code deviceHandle} are device 0's;
 * {@code devices} has every device (none for a provider without one) and an MR's {@code keys} its keys on each,
 * in device order ({@code device} is the number, {@code name} the device's; {@code placed} false, with empty keys,
 * on a device its access does not place it on).
 */
final class DumpJson
{
    static final ObjectMapper MAPPER = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private DumpJson()
    {
    }

    /**
     * One error-log entry, as {@code ErrorLogReader} gives it.
     */
    record ErrorEntry(int count, long firstMs, long lastMs, String exception)
    {
    }

    static ObjectNode build(final ControlFileSnapshot snapshot, final List<ErrorEntry> errors)
    {
        final ObjectNode root = MAPPER.createObjectNode();
        final ControlFileSnapshot.Header h = snapshot.header();

        final ObjectNode daemon = root.putObject("daemon");
        daemon.put("pid", h.pid());
        daemon.put("epoch", Sizes.hex(h.epoch()));
        daemon.put("devGen", h.devGen());
        daemon.put("heartbeatAgeMs", snapshot.heartbeat().ageMs());
        daemon.put("provider", h.provider());
        daemon.put("device", h.device());
        daemon.put("pdHandle", h.pdHandle());
        daemon.put("adoptedEpoch", 0 == h.adoptedEpoch() ? null : Sizes.hex(h.adoptedEpoch()));
        final ArrayNode devices = daemon.putArray("devices");
        for (final DeviceSnapshot.Device device : snapshot.devices().devices())
        {
            devices.addObject().put("number", device.number()).put("name", device.name())
                .put("pdHandle", device.pdHandle());
        }
        daemon.put("startTime", Instant.ofEpochMilli(h.startTimeMs()).toString());
        daemon.put("layoutVersion", h.layoutVersion());
        daemon.put("controlFile", snapshot.path().toString());
        daemon.put("hugepageBacked", h.hugepageBacked());
        daemon.put("baseVirtaddr", Sizes.hex(h.baseVirtaddr()));
        daemon.put("segmentSize", h.segmentSize());
        daemon.put("seq", h.seq());
        daemon.put("consistent", snapshot.consistent());

        final ArrayNode lists = root.putArray("memsegLists");
        for (final ControlFileSnapshot.MemsegList list : snapshot.lists())
        {
            final ObjectNode node = lists.addObject();
            node.put("index", list.index());
            node.put("baseVa", Sizes.hex(list.baseVa()));
            node.put("segmentSize", list.segmentSize());
            node.put("segments", list.segmentCount());
            node.put("allocatedSegments", list.allocatedSegments());
            node.put("backingPath", list.backingPath());
            node.put("hugetlbfs", list.hugetlbfs());
            final ArrayNode allocated = node.putArray("allocated");
            for (final ControlFileSnapshot.Allocated range : list.allocations())
            {
                final ObjectNode a = allocated.addObject();
                a.put("start", Sizes.hex(range.start()));
                a.put("end", Sizes.hex(range.end()));
                a.put("owner", range.owner());
                a.put("access", Access.describe(range.access()));
                a.put("firstSegment", range.firstSegment());
                a.put("segments", range.segmentCount());
            }
        }

        final ArrayNode mrs = root.putArray("mrs");
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            final ObjectNode node = mrs.addObject();
            node.put("index", mr.index());
            node.put("state", mr.stateName());
            node.put("lkey", Format.key(mr.lkey()));
            node.put("rkey", Format.key(mr.rkey()));
            node.put("access", Access.describe(mr.access()));
            node.put("start", Sizes.hex(mr.start()));
            node.put("end", Sizes.hex(mr.end()));
            node.put("msN", mr.msN());
            node.put("external", mr.external());
            node.put("listIndex", mr.listIndex());
            node.put("msBaseIdx", mr.msBaseIdx());
            node.put("msBmpN", mr.msBmpN());
            node.put("owner", mr.owner());
            node.put("created", Instant.ofEpochMilli(mr.createdMs()).toString());
            node.put("deviceHandle", mr.deviceHandle());
            final ArrayNode keys = node.putArray("keys");
            for (final DeviceSnapshot.Device device : snapshot.devices().devices())
            {
                final DeviceSnapshot.Keys k = snapshot.devices().keys(mr.index(), device.number());
                keys.addObject().put("device", device.number()).put("name", device.name())
                    .put("placed", Access.isOn(mr.access(), device.number()))
                    .put("lkey", Format.key(k.lkey())).put("rkey", Format.key(k.rkey()))
                    .put("deviceHandle", k.deviceHandle());
            }
            final ArrayNode chunks = node.putArray("chunks");
            for (final ControlFileSnapshot.Chunk chunk : mr.chunks())
            {
                final ObjectNode c = chunks.addObject();
                c.put("start", Sizes.hex(chunk.start()));
                c.put("end", Sizes.hex(chunk.end()));
            }
        }

        final ControlFileSnapshot.Cache cache = snapshot.cache();
        final ObjectNode cacheNode = root.putObject("cache");
        cacheNode.put("len", cache.len());
        cacheNode.put("capacity", cache.capacity());
        cacheNode.put("overflow", cache.overflow());
        final ArrayNode entries = cacheNode.putArray("entries");
        for (final ControlFileSnapshot.CacheEntry entry : cache.entries())
        {
            final ObjectNode e = entries.addObject();
            e.put("start", Sizes.hex(entry.start()));
            e.put("end", Sizes.hex(entry.end()));
            e.put("lkey", Format.key(entry.lkey()));
            e.put("rkey", Format.key(entry.rkey()));
            e.put("access", Access.describe(entry.access()));
            e.put("mr", entry.mr());
        }

        final ArrayNode clients = root.putArray("clients");
        for (final ControlFileSnapshot.Client client : snapshot.clients())
        {
            final ObjectNode c = clients.addObject();
            c.put("id", client.id());
            c.put("pid", client.pid());
            c.put("uid", client.uid());
            c.put("gid", client.gid());
            c.put("name", client.name());
            c.put("connected", Instant.ofEpochMilli(client.connectedMs()).toString());
        }

        final ObjectNode counters = root.putObject("counters");
        for (final MrdCounter counter : MrdCounter.values())
        {
            if (snapshot.counters().containsKey(counter))
            {
                counters.put(counter.metricName(), snapshot.counter(counter));
            }
        }

        if (null != errors)
        {
            final ArrayNode errorNodes = root.putArray("errors");
            for (final ErrorEntry error : errors)
            {
                final ObjectNode e = errorNodes.addObject();
                e.put("count", error.count());
                e.put("first", Instant.ofEpochMilli(error.firstMs()).toString());
                e.put("last", Instant.ofEpochMilli(error.lastMs()).toString());
                e.put("exception", error.exception());
            }
        }
        return root;
    }
}
