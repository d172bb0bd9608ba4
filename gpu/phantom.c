/* phantom.c — analytic ellipsoid phantoms, their exact line integrals, and simulated camera
 * frames (see phantom.h).
 *
 * Design choice: an ellipsoid is a unit sphere seen through an affine map, so both the
 * point test and the line integral transform into the sphere's frame once and do the easy
 * thing there (|q| <= 1, and the chord of a line through the unit sphere). The chord is
 * computed from the cross-product form of the discriminant, which does not cancel when
 * the ray's base point is far from the ellipsoid. Centres (x0, y0, z0) are positions in
 * normalised space and the Euler rotation turns the ellipsoid about its own centre (the
 * physically meaningful reading of the tables; phantom3d.m rotates the centre as well).
 */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/phantom.h"

int tl_phantom_init(tl_phantom *p, double radius, double z_center, double radius_z)
{
    memset(p, 0, sizeof *p);
    p->radius = radius;
    p->z_center = z_center;
    p->radius_z = radius_z;
    p->cap = 16;
    p->e = malloc(p->cap * sizeof *p->e);
    p->rot = malloc(p->cap * sizeof *p->rot);
    if (!p->e || !p->rot) {
        tl_phantom_free(p);
        return -1;
    }
    return 0;
}

void tl_phantom_scale_density(tl_phantom *p, double factor)
{
    for (size_t i = 0; i < p->n; i++)
        p->e[i].density *= factor;
}

void tl_phantom_free(tl_phantom *p)
{
    free(p->e);
    free(p->rot);
    p->e = NULL;
    p->rot = NULL;
    p->n = p->cap = 0;
}

/* R = Rz(phi) Rx(theta) Rz(psi): body -> normalised (ZXZ, angles in degrees). Its
 * transpose is the "alpha" matrix of phantom3d.m. */
static void euler_zxz(double phi, double theta, double psi, double R[9])
{
    double d = M_PI / 180.0;
    double cf = cos(phi * d), sf = sin(phi * d);
    double ct = cos(theta * d), st = sin(theta * d);
    double cp = cos(psi * d), sp = sin(psi * d);
    R[0] = cf * cp - sf * ct * sp;
    R[1] = -cf * sp - sf * ct * cp;
    R[2] = sf * st;
    R[3] = sf * cp + cf * ct * sp;
    R[4] = -sf * sp + cf * ct * cp;
    R[5] = -cf * st;
    R[6] = st * sp;
    R[7] = st * cp;
    R[8] = ct;
}

int tl_phantom_add(tl_phantom *p, const tl_ellipsoid *e)
{
    if (!(e->a > 0 && e->b > 0 && e->c > 0))
        return -1;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        tl_ellipsoid *ne = realloc(p->e, cap * sizeof *ne);
        if (!ne)
            return -1;
        p->e = ne;
        double(*nr)[9] = realloc(p->rot, cap * sizeof *nr);
        if (!nr)
            return -1;
        p->rot = nr;
        p->cap = cap;
    }
    p->e[p->n] = *e;
    euler_zxz(e->phi, e->theta, e->psi, p->rot[p->n]);
    p->n++;
    return 0;
}

int tl_phantom_shepp_logan(tl_phantom *p, double radius, double z_center, double radius_z)
{
    /* Modified Shepp-Logan (Toft, pp. 199-200), as in phantom3d.m:
     *   density  a  b  c  x0  y0  z0  phi  theta  psi */
    static const tl_ellipsoid sl[10] = {
        {1.0, .6900, .920, .810, 0, 0, 0, 0, 0, 0},
        {-.8, .6624, .874, .780, 0, -.0184, 0, 0, 0, 0},
        {-.2, .1100, .310, .220, .22, 0, 0, -18, 0, 10},
        {-.2, .1600, .410, .280, -.22, 0, 0, 18, 0, 10},
        {.1, .2100, .250, .410, 0, .35, -.15, 0, 0, 0},
        {.1, .0460, .046, .050, 0, .1, .25, 0, 0, 0},
        {.1, .0460, .046, .050, 0, -.1, .25, 0, 0, 0},
        {.1, .0460, .023, .050, -.08, -.605, 0, 0, 0, 0},
        {.1, .0230, .023, .020, 0, -.606, 0, 0, 0, 0},
        {.1, .0230, .046, .020, .06, -.605, 0, 0, 0, 0},
    };
    if (tl_phantom_init(p, radius, z_center, radius_z) != 0)
        return -1;
    for (size_t i = 0; i < 10; i++)
        if (tl_phantom_add(p, &sl[i]) != 0) {
            tl_phantom_free(p);
            return -1;
        }
    return 0;
}

/* Unit-sphere coordinates of a normalised-space vector v relative to ellipsoid i:
 * q = diag(1/a, 1/b, 1/c) R^T v. */
static void to_sphere(const tl_phantom *p, size_t i, const double v[3], double q[3])
{
    const double *R = p->rot[i];
    const tl_ellipsoid *e = &p->e[i];
    q[0] = (R[0] * v[0] + R[3] * v[1] + R[6] * v[2]) / e->a;
    q[1] = (R[1] * v[0] + R[4] * v[1] + R[7] * v[2]) / e->b;
    q[2] = (R[2] * v[0] + R[5] * v[1] + R[8] * v[2]) / e->c;
}

double tl_phantom_value(const tl_phantom *p, double x, double y, double z)
{
    double X = x / p->radius, Y = y / p->radius, Z = (z - p->z_center) / p->radius_z;
    double sum = 0;
    for (size_t i = 0; i < p->n; i++) {
        const tl_ellipsoid *e = &p->e[i];
        double v[3] = {X - e->x0, Y - e->y0, Z - e->z0}, q[3];
        to_sphere(p, i, v, q);
        if (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] <= 1.0)
            sum += e->density;
    }
    return sum;
}

/* The line base + s dir (normalised coordinates) against ellipsoid i: false if it misses,
 * else *sq, *aa and *bb such that it is inside for s in [(-bb - sq) / aa, (-bb + sq) / aa].
 * In the unit sphere's frame, |w0 + s w1|^2 = 1 has discriminant D = (w0.w1)^2 - |w1|^2
 * (|w0|^2 - 1) = |w1|^2 - |w0 x w1|^2: the cross-product form does not cancel for a line
 * far from the ellipsoid (a distant cone-beam source). */
static bool cut(const tl_phantom *p, size_t i, const double base[3], const double dir[3],
                double *sq, double *aa, double *bb)
{
    const tl_ellipsoid *e = &p->e[i];
    double v[3] = {base[0] - e->x0, base[1] - e->y0, base[2] - e->z0};
    double w0[3], w1[3];
    to_sphere(p, i, v, w0);
    to_sphere(p, i, dir, w1);
    double a = w1[0] * w1[0] + w1[1] * w1[1] + w1[2] * w1[2];
    double cx = w0[1] * w1[2] - w0[2] * w1[1];
    double cy = w0[2] * w1[0] - w0[0] * w1[2];
    double cz = w0[0] * w1[1] - w0[1] * w1[0];
    double D = a - (cx * cx + cy * cy + cz * cz);
    if (!(D > 0 && a > 0))
        return false;
    *sq = sqrt(D);
    *aa = a;
    *bb = w0[0] * w1[0] + w0[1] * w1[1] + w0[2] * w1[2];
    return true;
}

double tl_phantom_line_integral(const tl_phantom *p, double theta, double t, double z)
{
    double c = cos(theta), s = sin(theta);
    /* The ray x cos(theta) - y sin(theta) = t at row z: base point and unit direction in
     * volume coordinates, then in normalised coordinates (the direction keeps the volume
     * length per unit of the parameter, so chords come out in volume units). */
    double base[3] = {t * c / p->radius, -t * s / p->radius, (z - p->z_center) / p->radius_z};
    double dir[3] = {s / p->radius, c / p->radius, 0.0};
    double sum = 0;
    for (size_t i = 0; i < p->n; i++) {
        double sq, aa, bb;
        if (cut(p, i, base, dir, &sq, &aa, &bb))
            sum += p->e[i].density * 2.0 * sq / aa; /* the whole line: the whole chord */
    }
    return sum;
}

double tl_phantom_ray_integral(const tl_phantom *p, const double origin[3], const double dir[3])
{
    double len = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    if (!(len > 0))
        return 0.0;
    /* origin and unit direction in normalised coordinates (the direction keeps the world
     * length per unit of t, so chords come out in world units) */
    double base[3] = {origin[0] / p->radius, origin[1] / p->radius,
                      (origin[2] - p->z_center) / p->radius_z};
    double d[3] = {dir[0] / len / p->radius, dir[1] / len / p->radius, dir[2] / len / p->radius_z};
    double sum = 0;
    for (size_t i = 0; i < p->n; i++) {
        double sq, aa, bb, chord;
        if (!cut(p, i, base, d, &sq, &aa, &bb))
            continue;
        double t1 = (-bb - sq) / aa, t2 = (-bb + sq) / aa;
        if (t1 >= 0)
            chord = 2.0 * sq / aa; /* the whole chord lies ahead of the origin */
        else if (t2 > 0)
            chord = t2; /* the origin is inside: from it to the exit */
        else
            continue; /* behind the origin */
        sum += p->e[i].density * chord;
    }
    return sum;
}

void tl_phantom_project(const tl_phantom *p, double theta, double center, uint32_t rows,
                        uint32_t cols, float *out)
{
    for (uint32_t v = 0; v < rows; v++)
        for (uint32_t u = 0; u < cols; u++)
            out[(size_t)v * cols + u] =
                (float)tl_phantom_line_integral(p, theta, (double)u - center, (double)v);
}

/* ---- random numbers ----------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tl_rng_seed(tl_rng *r, uint64_t seed)
{
    /* splitmix64 expands one word into a state that is never all zero */
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tl_rng_next(tl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tl_rng_uniform(tl_rng *r)
{
    return (double)(tl_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Poisson variates: Knuth's product of uniforms below mean 10 (expected mean + 1
 * uniforms); above it Hörmann's PTRS transformed rejection ("The transformed rejection
 * method for generating Poisson random variables", Insurance: Mathematics and Economics
 * 12, 1993), exact and O(1) for any mean. */
uint64_t tl_rng_poisson(tl_rng *r, double mean)
{
    if (!(mean > 0))
        return 0;
    if (mean < 10.0) {
        double limit = exp(-mean), prod = tl_rng_uniform(r);
        uint64_t k = 0;
        while (prod > limit) {
            prod *= tl_rng_uniform(r);
            k++;
        }
        return k;
    }
    double slam = sqrt(mean), loglam = log(mean);
    double b = 0.931 + 2.53 * slam;
    double a = -0.059 + 0.02483 * b;
    double invalpha = 1.1239 + 1.1328 / (b - 3.4);
    double vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        double U = tl_rng_uniform(r) - 0.5;
        double V = tl_rng_uniform(r);
        double us = 0.5 - fabs(U);
        double k = floor((2.0 * a / us + b) * U + mean + 0.43);
        if (us >= 0.07 && V <= vr)
            return (uint64_t)k;
        if (k < 0 || (us < 0.013 && V > us))
            continue;
        if (log(V) + log(invalpha) - log(a / (us * us) + b) <=
            -mean + k * loglam - lgamma(k + 1.0))
            return (uint64_t)k;
    }
}

/* ---- camera frames ------------------------------------------------------------------ */

void tl_camera_init(tl_camera *c)
{
    c->flux = 10000.0;
    c->dark = 100.0;
    c->gain_variation = 0.1;
    c->noise = false;
}

/* A smooth pattern in [-1, 1]: a few incommensurate waves across the detector, like the
 * scintillator and optics non-uniformity that flat fields exist to remove. */
static double gain_pattern(uint32_t u, uint32_t v, uint32_t rows, uint32_t cols)
{
    double x = (u + 0.5) / cols, y = (v + 0.5) / rows;
    double g = 0.5 * sin(2 * M_PI * (1.7 * x + 0.13)) * cos(2 * M_PI * (1.3 * y + 0.21)) +
               0.3 * sin(2 * M_PI * (3.1 * x + 2.3 * y + 0.37)) +
               0.2 * cos(2 * M_PI * (0.6 * y - 0.9 * x + 0.05));
    return g; /* |g| <= 0.5 + 0.3 + 0.2 = 1 */
}

/* Counts of one pixel: photons (gain * flux * exp(-p)) plus the dark offset; with noise
 * both are Poisson (shot noise and the dark current's own statistics). */
static double pixel_counts(const tl_camera *c, tl_sim_kind kind, double p, double gain,
                           tl_rng *rng)
{
    double photons = kind == TL_SIM_DARK   ? 0.0
                     : kind == TL_SIM_FLAT ? gain * c->flux
                                           : gain * c->flux * exp(-p);
    if (!c->noise || !rng)
        return photons + c->dark;
    return (double)tl_rng_poisson(rng, photons) + (double)tl_rng_poisson(rng, c->dark);
}

void tl_camera_frame_f32(const tl_camera *c, tl_sim_kind kind, const float *line_integrals,
                         uint32_t rows, uint32_t cols, tl_rng *rng, float *out)
{
    for (uint32_t v = 0; v < rows; v++)
        for (uint32_t u = 0; u < cols; u++) {
            size_t k = (size_t)v * cols + u;
            double g = 1.0 + c->gain_variation * gain_pattern(u, v, rows, cols);
            double p = kind == TL_SIM_PROJ && line_integrals ? line_integrals[k] : 0.0;
            out[k] = (float)pixel_counts(c, kind, p, g, rng);
        }
}

void tl_camera_frame_u16(const tl_camera *c, tl_sim_kind kind, const float *line_integrals,
                         uint32_t rows, uint32_t cols, tl_rng *rng, uint16_t *out)
{
    for (uint32_t v = 0; v < rows; v++)
        for (uint32_t u = 0; u < cols; u++) {
            size_t k = (size_t)v * cols + u;
            double g = 1.0 + c->gain_variation * gain_pattern(u, v, rows, cols);
            double p = kind == TL_SIM_PROJ && line_integrals ? line_integrals[k] : 0.0;
            double n = nearbyint(pixel_counts(c, kind, p, g, rng));
            out[k] = n <= 0 ? 0 : n >= 65535.0 ? 65535 : (uint16_t)n;
        }
}
