<?php
// A tiny money parser standing in for a third-party package installed under vendor/.

namespace Acme\Money;

final class Money
{
    private function __construct(public readonly int $cents, public readonly string $currency)
    {
    }

    public static function parse(string $raw, string $currency): self
    {
        return new self(self::normalize($raw), $currency);
    }

    private static function normalize(string $raw): int
    {
        if (!preg_match('/^\d+(\.\d{2})?$/', $raw)) {
            throw new \InvalidArgumentException('invalid amount "' . $raw . '"');
        }
        return (int) round(((float) $raw) * 100);
    }
}
