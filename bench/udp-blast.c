/*
 * The kernel's UDP limit on this machine, printed beside the soft RoCE device's UD and multicast
 * rows of the bench (bench/kernel-udp.js builds this file with cc at bench time):
 *
 *   udp-blast recv PORT [GROUP]              count datagrams on PORT (joined to GROUP on 127.0.0.1)
 *   udp-blast send HOST PORT SIZE COUNT      send COUNT datagrams of SIZE bytes to HOST:PORT
 *
 * The sender moves BATCH datagrams per sendmmsg(2), as fast as the kernel takes them (a UDP send
 * on loopback does not block: what overflows the receiver's buffer is dropped). The receiver takes
 * up to BATCH per recvmmsg(2). Each prints one JSON line per burst: the sender when it is done,
 *   {"sent":N,"secs":S,"cpuUs":U}
 * the receiver when IDLE_MS have passed without a datagram after the first of a burst,
 *   {"count":N,"secs":S,"cpuUs":U}
 * (S from the first to the last arrival; U user + system time of the process over the burst, from
 * getrusage). The receiver prints {"ready":true} once bound and ends when its stdin closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define IDLE_MS 150
#define RCVBUF (8 << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static int die(const char *what)
{
	fprintf(stderr, "udp-blast: %s: %s\n", what, strerror(errno));
	return 1;
}

static int recv_main(int port, const char *group)
{
	static char bufs[BATCH][65536];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, size = RCVBUF;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* Capped by net.core.rmem_max, as the Node receivers' buffers are. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	sin.sin_addr.s_addr = group ? htonl(INADDR_ANY) : inet_addr("127.0.0.1");
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)))
		return die("bind");
	if (group) {
		struct ip_mreq mreq;

		mreq.imr_multiaddr.s_addr = inet_addr(group);
		mreq.imr_interface.s_addr = inet_addr("127.0.0.1");
		if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)))
			return die("IP_ADD_MEMBERSHIP");
	}
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = sizeof(bufs[i]);
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	printf("{\"ready\":true}\n");
	fflush(stdout);

	long count = 0;
	double first = 0, last = 0, cpu0 = 0;
	struct pollfd pfd[2] = { { .fd = fd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };

	for (;;) {
		int n = poll(pfd, 2, count ? 50 : 1000);

		if (n < 0 && errno != EINTR)
			return die("poll");
		if (pfd[1].revents)
			return 0; /* stdin closed (or written to): the bench is done with us */
		if (pfd[0].revents & POLLIN) {
			int got = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);

			if (got > 0) {
				if (count == 0) {
					first = now_s();
					cpu0 = cpu_us();
				}
				count += got;
				last = now_s();
			}
			continue;
		}
		if (count && (now_s() - last) * 1000 >= IDLE_MS) {
			printf("{\"count\":%ld,\"secs\":%.6f,\"cpuUs\":%.0f}\n", count, count > 1 ? last - first : 0.0, cpu_us() - cpu0);
			fflush(stdout);
			count = 0;
		}
	}
}

static int send_main(const char *host, int port, int size, long count)
{
	static char buf[65536];
	struct mmsghdr msgs[BATCH];
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)size };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct in_addr lo = { .s_addr = inet_addr("127.0.0.1") };
	int one = 1;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return die("socket");
	if (size < 0 || size > (int)sizeof(buf)) {
		fprintf(stderr, "udp-blast: size %d out of range\n", size);
		return 1;
	}
	memset(buf, 3, sizeof(buf));
	sin.sin_addr.s_addr = inet_addr(host);
	if (IN_MULTICAST(ntohl(sin.sin_addr.s_addr))) {
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	}
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		return die("connect");
	for (int i = 0; i < BATCH; i++) {
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}

	double t0 = now_s(), cpu0 = cpu_us();
	long sent = 0;

	while (sent < count) {
		int want = count - sent < BATCH ? (int)(count - sent) : BATCH;
		int n = sendmmsg(fd, msgs, want, 0);

		if (n < 0) {
			/* A full loopback queue (ENOBUFS) or a refused port: the datagram is gone, as Node's would be. */
			if (errno == ENOBUFS || errno == ECONNREFUSED || errno == EAGAIN) {
				sent++;
				continue;
			}
			return die("sendmmsg");
		}
		sent += n; /* a short count resumes at the first datagram not taken */
	}
	printf("{\"sent\":%ld,\"secs\":%.6f,\"cpuUs\":%.0f}\n", sent, now_s() - t0, cpu_us() - cpu0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "recv"))
		return recv_main(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
	if (argc == 6 && !strcmp(argv[1], "send"))
		return send_main(argv[2], atoi(argv[3]), atoi(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: udp-blast recv PORT [GROUP] | udp-blast send HOST PORT SIZE COUNT\n");
	return 2;
}
