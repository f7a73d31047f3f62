/** Dependency-free SVG charts for the report: grouped horizontal bars and time-series lines. */

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A "nice" axis maximum: 1, 2 or 5 × a power of ten, at least `value`. */
function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * exp >= value) return m * exp;
  return 10 * exp;
}

/** 4, 5 or 6 intervals, whichever makes round tick steps (1, 2, 2.5 or 5 × a power of ten). */
function tickCount(max: number): number {
  for (const n of [4, 5, 6]) {
    const step = max / n;
    const mantissa = step / 10 ** Math.floor(Math.log10(step));
    if ([1, 2, 2.5, 5].some((m) => Math.abs(mantissa - m) < 1e-9)) return n;
  }
  return 4;
}

function compact(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return `${Math.round(n)}`;
}

export interface Bar {
  label: string;
  value: number;
  color: string;
}

export interface BarPanel {
  title: string;
  bars: Bar[];
}

const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

/** Horizontal bars, one panel per data set, stacked vertically. */
export function barChart(title: string, unit: string, panels: BarPanel[]): string {
  const width = 940;
  const labelWidth = 380;
  const barArea = width - labelWidth - 90;
  const rowHeight = 24;
  const parts: string[] = [];
  let y = 40;
  parts.push(`<text x="16" y="26" font-size="16" font-weight="600">${esc(title)}</text>`);
  for (const panel of panels) {
    const max = niceMax(
      Math.max(...panel.bars.map((b) => (Number.isFinite(b.value) ? b.value : 0))),
    );
    parts.push(
      `<text x="16" y="${y + 16}" font-size="13" font-weight="600">${esc(panel.title)}</text>`,
    );
    y += 26;
    const top = y;
    for (const bar of panel.bars) {
      const w = Number.isFinite(bar.value) ? (bar.value / max) * barArea : 0;
      parts.push(
        `<text x="${labelWidth - 8}" y="${y + 16}" font-size="12" text-anchor="end">${esc(bar.label)}</text>`,
        `<rect x="${labelWidth}" y="${y + 4}" width="${w.toFixed(1)}" height="${rowHeight - 8}" fill="${bar.color}" rx="2"/>`,
        `<text x="${(labelWidth + w + 6).toFixed(1)}" y="${y + 16}" font-size="11">${Number.isFinite(bar.value) ? compact(bar.value) : 'n/a'}</text>`,
      );
      y += rowHeight;
    }
    const ticks = tickCount(max);
    for (let i = 0; i <= ticks; i++) {
      const x = labelWidth + (barArea * i) / ticks;
      parts.push(
        `<line x1="${x}" y1="${top}" x2="${x}" y2="${y}" stroke="#ccc" stroke-width="0.5"/>`,
        `<text x="${x}" y="${y + 14}" font-size="10" text-anchor="middle" fill="#555">${compact((max * i) / ticks)}</text>`,
      );
    }
    parts.push(
      `<text x="${labelWidth + barArea}" y="${y + 28}" font-size="10" text-anchor="end" fill="#555">${esc(unit)}</text>`,
    );
    y += 44;
  }
  return svgDocument(width, y, parts);
}

export interface Series {
  label: string;
  color: string;
  points: { x: number; y: number }[];
}

/** Lines over a shared x axis (e.g. seconds), y from 0. */
export function lineChart(title: string, xUnit: string, yUnit: string, series: Series[]): string {
  const width = 860;
  const height = 380;
  const left = 70;
  const right = 20;
  const top = 80;
  const bottom = 50;
  const xs = series.flatMap((s) => s.points.map((p) => p.x));
  const ys = series.flatMap((s) => s.points.map((p) => p.y));
  const xMax = niceMax(Math.max(...xs, 1));
  const yMax = niceMax(Math.max(...ys, 1));
  const px = (x: number) => left + (x / xMax) * (width - left - right);
  const py = (y: number) => height - bottom - (y / yMax) * (height - top - bottom);
  const parts: string[] = [
    `<text x="16" y="26" font-size="16" font-weight="600">${esc(title)}</text>`,
  ];
  const yTicks = tickCount(yMax);
  const xTicks = tickCount(xMax);
  for (let i = 0; i <= yTicks; i++) {
    const yv = (yMax * i) / yTicks;
    parts.push(
      `<line x1="${left}" y1="${py(yv)}" x2="${width - right}" y2="${py(yv)}" stroke="#ddd" stroke-width="0.5"/>`,
      `<text x="${left - 6}" y="${py(yv) + 4}" font-size="10" text-anchor="end" fill="#555">${compact(yv)}</text>`,
    );
  }
  for (let i = 0; i <= xTicks; i++) {
    const xv = (xMax * i) / xTicks;
    parts.push(
      `<text x="${px(xv)}" y="${height - bottom + 16}" font-size="10" text-anchor="middle" fill="#555">${compact(xv)}</text>`,
    );
  }
  parts.push(
    `<text x="${(left + width - right) / 2}" y="${height - 12}" font-size="11" text-anchor="middle">${esc(xUnit)}</text>`,
    `<text x="16" y="${(top + height - bottom) / 2}" font-size="11" transform="rotate(-90 16 ${(top + height - bottom) / 2})" text-anchor="middle">${esc(yUnit)}</text>`,
  );
  series.forEach((s, i) => {
    const d = s.points.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ');
    parts.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${d}"/>`,
      `<rect x="${left + 10 + i * 160}" y="${top - 26}" width="12" height="4" fill="${s.color}"/>`,
      `<text x="${left + 28 + i * 160}" y="${top - 21}" font-size="11">${esc(s.label)}</text>`,
    );
  });
  return svgDocument(width, height, parts);
}

function svgDocument(width: number, height: number, parts: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...parts.map((p) => `  ${p}`),
    '</svg>',
    '',
  ].join('\n');
}
