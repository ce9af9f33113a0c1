"""Gas concentrations between µg/m³ and mixing ratios, at 25 °C and 1 atm.

µg/m³ = ppb · M / 24.45, with 24.45 L/mol the molar volume of an ideal gas at 25 °C and
101.325 kPa: the convention of the US EPA's AQI, of OpenAQ's conversions and of the EEA
index's ppb tables (EU directive reporting uses 20 °C instead, about 1.7 % higher).
"""

from __future__ import annotations

from cleanair_core.air.pollutants import Pollutant

#: Litres per mole of an ideal gas at 25 °C and 1 atm.
MOLAR_VOLUME_25C = 24.45
#: g/mol.
MOLAR_MASS: dict[Pollutant, float] = {
    Pollutant.NO2: 46.0055,
    Pollutant.O3: 47.9982,
    Pollutant.SO2: 64.066,
}


def ppb_from_ugm3(pollutant: Pollutant, ugm3: float) -> float:
    """A gas's µg/m³ as ppb (nmol/mol) at 25 °C."""
    return ugm3 * MOLAR_VOLUME_25C / MOLAR_MASS[pollutant]


def ugm3_from_ppb(pollutant: Pollutant, ppb: float) -> float:
    """A gas's ppb as µg/m³ at 25 °C."""
    return ppb * MOLAR_MASS[pollutant] / MOLAR_VOLUME_25C
