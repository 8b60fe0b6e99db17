// Kotlin: a NumberFormatException from the standard library inside a lambda.
package com.acme.agent

fun parseQuantities(lines: List<String>): List<Int> = lines.map { line -> line.substringAfter("qty=").toInt() }

fun importOrder(orderId: String) {
    parseQuantities(listOf("sku=A1 qty=2", "sku=B7 qty=two key=${System.getenv("AWS_KEY")}"))
}

fun main() {
    importOrder("ORD-71830")
}
