// ExonPingPong: round-trip latency of the real Aeron Java client + embedded driver (SHARED
// threading, yielding poll loops: the same shape as exon's native ping-pong), for
// `exon bench transport`.
//
//   java ExonPingPong DIR PING_CHANNEL PONG_CHANNEL COUNT LENGTH
//
// Prints one line: "RTT_US p50 p99 p999 count" (the first 10% of round trips are warm-up).
import io.aeron.Aeron;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.Arrays;

public final class ExonPingPong
{
    public static void main(final String[] args) throws Exception
    {
        final String dir = args[0];
        final String pingChannel = args[1];
        final String pongChannel = args[2];
        final int count = Integer.parseInt(args[3]);
        final int length = Integer.parseInt(args[4]);
        final MediaDriver.Context ctx = new MediaDriver.Context()
            .aeronDirectoryName(dir).threadingMode(ThreadingMode.SHARED).dirDeleteOnStart(true);
        try (MediaDriver md = MediaDriver.launchEmbedded(ctx);
            Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir));
            Subscription pingSub = aeron.addSubscription(pingChannel, 1001);
            Subscription pongSub = aeron.addSubscription(pongChannel, 1002);
            Publication pingPub = aeron.addExclusivePublication(pingChannel, 1001);
            Publication pongPub = aeron.addExclusivePublication(pongChannel, 1002))
        {
            while (!pingPub.isConnected() || !pongPub.isConnected())
            {
                Thread.sleep(1);
            }
            final boolean[] running = { true };
            final Thread ponger = new Thread(() ->
            {
                while (running[0])
                {
                    final int n = pingSub.poll((buffer, offset, len, header) ->
                    {
                        while (pongPub.offer(buffer, offset, len) < 0 && running[0])
                        {
                            Thread.yield();
                        }
                    }, 16);
                    if (n == 0)
                    {
                        Thread.yield();
                    }
                }
            });
            ponger.start();
            final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(Math.max(length, 8)));
            final long[] rtt = new long[count];
            final int[] got = new int[1];
            for (int i = 0; i < count; i++)
            {
                final long t0 = System.nanoTime();
                buffer.putLong(0, t0);
                while (pingPub.offer(buffer, 0, length) < 0)
                {
                    Thread.yield();
                }
                got[0] = 0;
                while (got[0] == 0)
                {
                    if (pongSub.poll((b, o, l, h) -> got[0]++, 1) == 0)
                    {
                        Thread.yield();
                    }
                }
                rtt[i] = System.nanoTime() - t0;
            }
            running[0] = false;
            ponger.join();
            final long[] v = Arrays.copyOfRange(rtt, count / 10, count);
            Arrays.sort(v);
            System.out.printf("RTT_US %.3f %.3f %.3f %d%n", v[(int)(0.5 * v.length)] / 1000.0,
                v[Math.min(v.length - 1, (int)(0.99 * v.length))] / 1000.0,
                v[Math.min(v.length - 1, (int)(0.999 * v.length))] / 1000.0, v.length);
        }
    }
}
