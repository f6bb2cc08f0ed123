package io.mrd.secondary.verbs;

import io.mrd.testing.VerbsHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every field of every verbs.h struct the datapath uses, at the offset the installed header gives it
 * ({@code offsetof}, compiled here), and the whole structs at its {@code sizeof}: the FFM layouts of
 * {@link IbvStructs} walked member by member, nested structs included.
 */
final class VerbsLayoutTest
{
    /** C member paths where the layout's name differs (the rdma member of ibv_send_wr's wr union). */
    private static final Map<String, String> C_PATHS = Map.of(
        "ibv_send_wr.remote_addr", "wr.rdma.remote_addr",
        "ibv_send_wr.rkey", "wr.rdma.rkey");

    @TempDir
    Path dir;

    @Test
    void everyFieldIsWhereTheInstalledHeaderPutsItAndEveryWholeStructHasItsSize() throws Exception
    {
        final Map<String, Long> expected = new LinkedHashMap<>();
        for (final StructLayout struct : List.of(IbvStructs.IBV_CONTEXT, IbvStructs.IBV_PD, IbvStructs.IBV_CQ,
            IbvStructs.IBV_QP, IbvStructs.IBV_QP_INIT_ATTR, IbvStructs.IBV_QP_ATTR, IbvStructs.IBV_PORT_ATTR,
            IbvStructs.IBV_SGE, IbvStructs.IBV_SEND_WR, IbvStructs.IBV_RECV_WR, IbvStructs.IBV_WC))
        {
            walk(struct.name().orElseThrow(), struct, "", 0, expected);
        }
        for (final StructLayout whole : List.of(IbvStructs.IBV_CONTEXT_OPS, IbvStructs.IBV_PD,
            IbvStructs.IBV_QP_CAP, IbvStructs.IBV_QP_INIT_ATTR, IbvStructs.IBV_AH_ATTR, IbvStructs.IBV_QP_ATTR,
            IbvStructs.IBV_SGE, IbvStructs.IBV_SEND_WR, IbvStructs.IBV_RECV_WR, IbvStructs.IBV_WC))
        {
            expected.put("sizeof(struct " + whole.name().orElseThrow() + ")", whole.byteSize());
        }
        final Map<String, Long> header = VerbsHeader.evaluate(dir, new ArrayList<>(expected.keySet()));
        for (final Map.Entry<String, Long> e : expected.entrySet())
        {
            assertEquals(header.get(e.getKey()), e.getValue(), e.getKey());
        }
        assertTrue(expected.size() > 100, "walked " + expected.size() + " fields");
        assertTrue(expected.containsKey("offsetof(struct ibv_context, ops.post_send)"));
        assertTrue(expected.containsKey("offsetof(struct ibv_send_wr, wr.rdma.rkey)"));
    }

    private static void walk(
        final String struct, final GroupLayout group, final String prefix, final long base,
        final Map<String, Long> expected)
    {
        long offset = base;
        for (final MemoryLayout member : group.memberLayouts())
        {
            if (!(member instanceof PaddingLayout) && member.name().isPresent())
            {
                final String name = member.name().get();
                final String path = C_PATHS.getOrDefault(struct + "." + prefix + name, prefix + name);
                expected.put("offsetof(struct " + struct + ", " + path + ")", offset);
                if (member instanceof GroupLayout nested && !name.equals("grh"))
                {
                    walk(struct, nested, path + ".", offset, expected);
                }
            }
            offset += member.byteSize();
        }
    }
}
