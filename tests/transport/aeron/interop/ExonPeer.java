// A small real-Aeron (1.15.1) peer for exon's interop tests, compiled with javac against
// aeron-all-1.15.1.jar. It embeds a media driver (SHARED threading, its own directory).
//
//   java ExonPeer pub CHANNEL STREAM COUNT SEED TIMEOUT_S   publish COUNT deterministic messages
//   java ExonPeer sub CHANNEL STREAM COUNT SEED TIMEOUT_S   receive and verify COUNT messages
//
// Messages: the generator below (twin of tests/transport/aeron/interop_peer.py) gives message
// i's length and bytes. Output lines: READY, then OK <count> or FAIL <reason>; exit 0 on OK.
import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

public final class ExonPeer
{
    static final int[] SIZES = { 0, 1, 31, 100, 1000, 1376, 1377, 3000, 8000 };

    static long next(final long state)
    {
        return state * 6364136223846793005L + 1442695040888963407L;
    }

    static byte[] message(final long seed, final int i)
    {
        long s = next(seed ^ (i * 0x9E3779B97F4A7C15L));
        final int length = SIZES[(int)((s >>> 33) % SIZES.length)];
        final byte[] out = new byte[length];
        s = next(s);
        for (int j = 0; j < length; j++)
        {
            out[j] = (byte)((s >>> 40) + j * 31 + i);
        }
        return out;
    }

    public static void main(final String[] args) throws Exception
    {
        final String mode = args[0];
        final String channel = args[1];
        final int stream = Integer.parseInt(args[2]);
        final int count = Integer.parseInt(args[3]);
        final long seed = Long.parseLong(args[4]);
        final long deadline = System.nanoTime() + Long.parseLong(args[5]) * 1_000_000_000L;
        final MediaDriver.Context ctx = new MediaDriver.Context()
            .threadingMode(ThreadingMode.SHARED)
            .dirDeleteOnStart(true);
        try (MediaDriver driver = MediaDriver.launchEmbedded(ctx);
            Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName())))
        {
            if (mode.equals("pub"))
            {
                publish(aeron, channel, stream, count, seed, deadline);
            }
            else
            {
                subscribe(aeron, channel, stream, count, seed, deadline);
            }
        }
    }

    static void publish(final Aeron aeron, final String channel, final int stream, final int count,
        final long seed, final long deadline) throws Exception
    {
        try (Publication pub = aeron.addPublication(channel, stream))
        {
            System.out.println("READY");
            System.out.flush();
            final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(16 * 1024));
            int i = 0;
            while (i < count)
            {
                if (System.nanoTime() > deadline)
                {
                    System.out.println("FAIL timeout after " + i + " messages");
                    System.exit(1);
                }
                final byte[] m = message(seed, i);
                buffer.putBytes(0, m);
                final long rc = pub.offer(buffer, 0, m.length);
                if (rc > 0)
                {
                    i++;
                }
                else
                {
                    Thread.yield();
                }
            }
            // let the receiver catch up (and NAK) before the publication closes
            Thread.sleep(2000);
            System.out.println("OK " + i);
        }
    }

    static void subscribe(final Aeron aeron, final String channel, final int stream, final int count,
        final long seed, final long deadline)
    {
        final int[] received = { 0 };
        final String[] failure = { null };
        final FragmentHandler handler = new FragmentAssembler((buffer, offset, length, header) ->
        {
            final byte[] expected = message(seed, received[0]);
            boolean same = expected.length == length;
            for (int j = 0; same && j < length; j++)
            {
                same = expected[j] == buffer.getByte(offset + j);
            }
            if (!same && failure[0] == null)
            {
                failure[0] = "message " + received[0] + " differs (length " + length + ", expected " + expected.length + ")";
            }
            received[0]++;
        });
        try (Subscription sub = aeron.addSubscription(channel, stream))
        {
            System.out.println("READY");
            System.out.flush();
            while (received[0] < count && failure[0] == null)
            {
                if (System.nanoTime() > deadline)
                {
                    System.out.println("FAIL timeout with " + received[0] + " messages");
                    System.exit(1);
                }
                if (sub.poll(handler, 256) == 0)
                {
                    Thread.yield();
                }
            }
        }
        if (failure[0] != null)
        {
            System.out.println("FAIL " + failure[0]);
            System.exit(1);
        }
        System.out.println("OK " + received[0]);
    }
}
