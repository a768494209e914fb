// ExonInterop: the real Aeron 1.15.1 Java side of exon's interop tests.
//
//   java ExonInterop pub DIR CHANNEL STREAM N   publish N messages (deterministic pattern),
//                                               then stay up until stdin closes
//   java ExonInterop sub DIR CHANNEL STREAM N TIMEOUT_S
//                                               count and check N messages, print a summary
//
// Each run embeds its own MediaDriver (SHARED threading) on DIR. With
// -Daeron.debug.receive.data.loss.rate=R the driver drops received data datagrams
// (Aeron's DebugReceiveChannelEndpoint). Message i has length lengthOf(i) and byte j equal
// to (i * 31 + j) & 0xff, except bytes 0..3 which hold i (little-endian).
import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.driver.ext.DebugReceiveChannelEndpointSupplier;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

public final class ExonInterop
{
    static final int[] SIZES = { 4, 8, 31, 32, 100, 500, 1000, 1376, 1377, 3000, 5000, 9000 };

    static int lengthOf(final int i)
    {
        return SIZES[i % SIZES.length];
    }

    static void fill(final UnsafeBuffer buffer, final int i, final int length)
    {
        for (int j = 0; j < length; j++)
        {
            buffer.putByte(j, (byte)((i * 31 + j) & 0xff));
        }
        buffer.putInt(0, i, ByteOrder.LITTLE_ENDIAN);
    }

    static MediaDriver driver(final String dir)
    {
        final MediaDriver.Context ctx = new MediaDriver.Context()
            .aeronDirectoryName(dir)
            .threadingMode(ThreadingMode.SHARED)
            .dirDeleteOnStart(true);
        if (System.getProperty("aeron.debug.receive.data.loss.rate") != null)
        {
            ctx.receiveChannelEndpointSupplier(new DebugReceiveChannelEndpointSupplier());
        }
        return MediaDriver.launchEmbedded(ctx);
    }

    public static void main(final String[] args) throws Exception
    {
        final String mode = args[0];
        final String dir = args[1];
        final String channel = args[2];
        final int stream = Integer.parseInt(args[3]);
        final int count = Integer.parseInt(args[4]);
        try (MediaDriver md = driver(dir);
            Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir)))
        {
            if (mode.equals("pub"))
            {
                publish(aeron, channel, stream, count);
            }
            else
            {
                subscribe(aeron, channel, stream, count, Long.parseLong(args[5]));
            }
        }
    }

    static void publish(final Aeron aeron, final String channel, final int stream, final int count) throws Exception
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024));
        try (Publication pub = aeron.addPublication(channel, stream))
        {
            System.out.println("READY");
            System.out.flush();
            final long deadline = System.nanoTime() + 60_000_000_000L;
            while (!pub.isConnected() && System.nanoTime() < deadline)
            {
                Thread.sleep(1);
            }
            int sent = 0;
            while (sent < count && System.nanoTime() < deadline)
            {
                final int length = lengthOf(sent);
                fill(buffer, sent, length);
                if (pub.offer(buffer, 0, length) > 0)
                {
                    sent++;
                }
                else
                {
                    Thread.yield();
                }
            }
            System.out.println("SENT " + sent);
            System.out.flush();
            while (System.in.read() >= 0)
            {
                // stay up (serving NAKs) until the test closes stdin
            }
        }
    }

    static void subscribe(final Aeron aeron, final String channel, final int stream, final int count, final long timeoutS)
        throws Exception
    {
        final int[] state = new int[3]; // received, ok, bad
        final FragmentHandler handler = new FragmentAssembler((DirectBuffer b, int offset, int length, io.aeron.logbuffer.Header h) ->
        {
            final int expected = state[0];
            boolean good = length == lengthOf(expected) && length >= 4 &&
                b.getInt(offset, ByteOrder.LITTLE_ENDIAN) == expected;
            for (int j = 4; good && j < length; j++)
            {
                good = b.getByte(offset + j) == (byte)((expected * 31 + j) & 0xff);
            }
            state[0]++;
            state[good ? 1 : 2]++;
        });
        try (Subscription sub = aeron.addSubscription(channel, stream))
        {
            System.out.println("READY");
            System.out.flush();
            final long deadline = System.nanoTime() + timeoutS * 1_000_000_000L;
            while (state[0] < count && System.nanoTime() < deadline)
            {
                if (sub.poll(handler, 256) == 0)
                {
                    Thread.yield();
                }
            }
            System.out.println("RECEIVED " + state[0] + " OK " + state[1] + " BAD " + state[2]);
            System.out.flush();
        }
    }
}
